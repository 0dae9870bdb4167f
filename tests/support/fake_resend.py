"""A fake Resend email API on 127.0.0.1 that behaves like the real one where it matters to a
sender: team-wide rate limiting with Resend's headers, POST /emails and POST /emails/batch
(strict and permissive validation), idempotency keys, and Resend's error bodies. Tests and
benches drive it over real HTTP and read back what was actually sent (`sent`, `sent_to`,
`duplicates()`), and can script failures: `fail_next`, `hang_next`, `refuse_until`.

Behaviour follows Resend's public documentation (api-reference: introduction, errors,
rate-limit, send-email, send-batch-emails, batch validation modes, idempotency keys).
Where the documentation is silent, the choice made here is marked "Docs are silent".

The time the rate limiter and the idempotency keys see is `clock()`, injectable so a test
drives it with `ManualClock` instead of sleeping. Hangs (`hang_next`) are real time: they
exist to make a client's own timeout fire.
"""

import argparse
import collections
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BATCH_EMAILS = 100
MAX_RECIPIENTS = 50
MAX_IDEMPOTENCY_KEY_LENGTH = 256
EMAILS_PATH = "/emails"
BATCH_PATH = "/emails/batch"

# A token count that floating-point refills leave a hair under a whole number still counts
# as that number (e.g. three refills of a third of a second at rate 3).
_EPSILON = 1e-9

_ADDRESS = re.compile(r"[^@\s<>]+@[^@\s<>.]+(?:\.[^@\s<>.]+)+")
_NAMED_ADDRESS = re.compile(r"[^<>]*<\s*([^<>]*?)\s*>")

_DEFAULT_ERROR_NAMES = {
    400: "validation_error",
    401: "missing_api_key",
    403: "invalid_api_key",
    404: "not_found",
    405: "method_not_allowed",
    409: "concurrent_idempotent_requests",
    422: "validation_error",
    429: "rate_limit_exceeded",
}
_RATE_LIMIT_MESSAGE = (
    "Too many requests. Please limit the number of requests per second. "
    "Or contact support to increase rate limit."
)


class ManualClock:
    """A clock that moves only when told to: `clock()` reads it, `advance(s)` moves it."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        with self._lock:
            self._now += seconds


@dataclass(frozen=True)
class SentEmail:
    """One email the fake accepted and sent (a replayed answer sends nothing)."""

    id: str
    sender: str
    to: list[str]
    subject: str
    text: str | None
    html: str | None
    idempotency_key: str | None
    batch_index: int | None  # position in the /emails/batch payload; None for /emails
    request_number: int  # ResendRequest.number of the request that sent it
    cc: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # the email's custom headers
    bcc: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ResendRequest:
    """One request as received and answered. `number` counts arrivals from 1; the list
    `FakeResend.requests` is in answering order."""

    number: int
    method: str
    path: str
    status: int
    headers: dict[str, str]  # lower-case names
    body: Any  # the parsed JSON body; None when empty or not JSON
    answered_at: float  # clock() when answered
    response: Any  # the parsed JSON answer; the raw text when it is not JSON


@dataclass
class _Answer:
    status: int
    payload: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


@dataclass
class _Failure:
    status: int
    name: str
    headers: dict[str, str]
    after_processing: bool


@dataclass
class _Refusal:
    until: float
    status: int
    retry_after: int | None


@dataclass
class _IdempotentEntry:
    path: str
    body: bytes
    stored_at: float = 0.0
    answer: _Answer | None = None  # None while the first request is still being processed


class _InvalidEmail(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def _error_answer(status: int, name: str, message: str) -> _Answer:
    """Resend's error body: {"statusCode", "message", "name"}."""
    payload = {"statusCode": status, "message": message, "name": name}
    return _Answer(status, json.dumps(payload).encode())


def _json_answer(payload: object) -> _Answer:
    return _Answer(200, json.dumps(payload).encode())


def _format_rate(rate: float) -> str:
    return str(int(rate)) if float(rate).is_integer() else f"{rate:g}"


class FakeResend:
    """The fake API. Construct, `start()` (or use `fake_resend(...)`), point the client at
    `url` with `Authorization: Bearer <api_key>`, then read what happened.

    `sent`, `sent_to` and `requests` are appended to by the server's threads; each email
    and request is recorded before its answer is written, so whatever a client has been
    answered is already there when it looks."""

    def __init__(
        self,
        *,
        rate: float = 2.0,
        burst: int | None = None,
        api_key: str = "re_test_key",
        key_ttl_seconds: float = 86_400,
        clock: Callable[[], float] = time.monotonic,
        port: int = 0,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.burst = burst if burst is not None else max(1, math.ceil(rate))
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        self.api_key = api_key
        self.key_ttl_seconds = key_ttl_seconds
        self.clock = clock
        self.port = port

        # Bare addresses ("Ada <ada@x.test>" counts as "ada@x.test") of to, cc and bcc.
        self.sent_to: collections.Counter[str] = collections.Counter()
        self.sent: list[SentEmail] = []
        self.requests: list[ResendRequest] = []

        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tokens = float(self.burst)
        self._refilled_at = clock()
        self._arrivals = 0
        self._failures: collections.deque[_Failure] = collections.deque()
        self._hangs: collections.deque[float] = collections.deque()
        self._hanging: list[threading.Event] = []
        self._refusal: _Refusal | None = None
        self._idempotent: dict[str, _IdempotentEntry] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake has not been started")
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def start(self) -> "FakeResend":
        self._httpd = _Server(("127.0.0.1", self.port), _handler_for(self))
        # shutdown() waits for the serving loop's next poll: a short interval keeps a
        # fake per test cheap to stop.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release_hung()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    # -- reading what happened -------------------------------------------------------------

    def answered(self, status: int) -> int:
        """How many requests were answered with `status`."""
        with self._lock:
            return sum(1 for request in self.requests if request.status == status)

    def duplicates(self) -> dict[str, int]:
        """Recipients that were sent more than one email, with how many."""
        with self._lock:
            return {address: count for address, count in self.sent_to.items() if count > 1}

    @property
    def hanging(self) -> int:
        """Requests held by `hang_next` right now."""
        with self._lock:
            return len(self._hanging)

    def wait_until_hanging(self, count: int, *, timeout: float = 5.0) -> None:
        """Block until `count` requests are held by `hang_next` (a test's way to know the
        held request has arrived, without sleeping)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._hanging) >= count, timeout):
                raise TimeoutError(f"{count} hanging request(s) not seen within {timeout}s")

    def wait_until_answered(self, count: int, *, timeout: float = 5.0) -> None:
        """Block until `count` requests in all have been answered (recorded in `requests`),
        including held ones whose client gave up."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"{count} answered request(s) not seen within {timeout}s")

    # -- scripting failures ----------------------------------------------------------------

    def fail_next(
        self,
        count: int,
        *,
        status: int,
        name: str = "",
        headers: dict[str, str] | None = None,
        after_processing: bool = False,
    ) -> None:
        """Answer the next `count` requests that pass auth and the rate limit with this
        error (a 429 from the bucket does not use one up). With `after_processing` the
        request is processed first (emails sent, idempotency key stored) and only its answer
        is replaced: the "sent, but the answer was lost" case."""
        failure = _Failure(
            status=status,
            name=name or _DEFAULT_ERROR_NAMES.get(status, "internal_server_error"),
            headers=dict(headers or {}),
            after_processing=after_processing,
        )
        with self._lock:
            self._failures.extend(failure for _ in range(count))

    def hang_next(self, count: int, seconds: float) -> None:
        """Hold the next `count` requests that pass auth and the rate limit for `seconds`
        of real time before they are processed. A held request's idempotency key is in
        progress meanwhile, and it is processed (sent) when the hold ends even if its
        client has given up, as a real server would."""
        with self._lock:
            self._hangs.extend(seconds for _ in range(count))

    def release_hung(self) -> None:
        """End every current hold now."""
        with self._lock:
            for released in self._hanging:
                released.set()

    def refuse_until(
        self, moment: float, *, status: int = 429, retry_after: int | None = None
    ) -> None:
        """Answer every authenticated request with `status` until `clock()` reaches
        `moment` (a provider that throttles a team for minutes). Refused requests use no
        tokens and send nothing. `retry_after` defaults to the seconds left until
        `moment` for a 429, and is left out for other statuses."""
        with self._lock:
            self._refusal = _Refusal(until=moment, status=status, retry_after=retry_after)

    # -- the request pipeline --------------------------------------------------------------

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> _Answer:
        with self._lock:
            self._arrivals += 1
            number = self._arrivals
        body = _parse_json(raw)
        answer = self._answer(number, method, path, headers, raw, body)
        with self._changed:
            self.requests.append(
                ResendRequest(
                    number=number,
                    method=method,
                    path=path,
                    status=answer.status,
                    headers=headers,
                    body=body,
                    answered_at=self.clock(),
                    response=_parsed_or_text(answer.payload),
                )
            )
            self._changed.notify_all()
        return answer

    def _answer(
        self,
        number: int,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        body: Any,
    ) -> _Answer:
        if not headers.get("user-agent"):
            # Resend's edge (Cloudflare) rejects a request without a User-Agent before the
            # API sees it: 403 with Cloudflare's "error code: 1010" text, not a JSON error.
            return _Answer(403, b"error code: 1010", content_type="text/plain; charset=UTF-8")
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _error_answer(
                401, "missing_api_key", "Missing API key in the authorization header."
            )
        if token.strip() != self.api_key:
            return _error_answer(403, "invalid_api_key", "API key is invalid.")

        # Docs are silent on what counts against the limit: every authenticated request
        # does, replays and rejected ones included, as the docs say "every request".
        with self._lock:
            refused = self._refused()
            if refused is not None:
                return refused
            limited = self._take_token()
            if limited is not None:
                return limited
            rate_headers = self._rate_limit_headers()
            failure = self._failures.popleft() if self._failures else None
            hang = self._hangs.popleft() if self._hangs else None

        if failure is not None and not failure.after_processing:
            if hang is not None:
                self._hold(hang)
            answer = self._injected(failure)
        else:
            answer = self._process(number, method, path, headers, raw, body, hang)
            if failure is not None:
                answer = self._injected(failure)
        answer.headers = {**rate_headers, **answer.headers}
        return answer

    def _process(
        self,
        number: int,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        body: Any,
        hang: float | None,
    ) -> _Answer:
        key = headers.get("idempotency-key")
        early = _rejected(method, path, body, key)
        if early is None and key is not None:
            with self._lock:
                early = self._claim_key(key, path, raw)
        if early is not None:
            if hang is not None:
                self._hold(hang)
            return early
        # From here the key (if any) is in progress: whatever happens, it is settled.
        answer = None
        try:
            if hang is not None:
                self._hold(hang)
            with self._lock:
                if path == EMAILS_PATH:
                    answer = self._send_one(number, body, key)
                else:
                    answer = self._send_batch(number, body, key, headers)
                if key is not None:
                    self._settle_key(key, answer)
            return answer
        finally:
            if key is not None and answer is None:
                with self._lock:
                    self._settle_key(key, None)

    # -- rate limiting (call with the lock held) -------------------------------------------

    def _refused(self) -> _Answer | None:
        refusal = self._refusal
        if refusal is None:
            return None
        left = refusal.until - self.clock()
        if left <= 0:
            self._refusal = None
            return None
        seconds_left = max(1, math.ceil(left))
        headers = {
            "ratelimit-limit": _format_rate(self.rate),
            "ratelimit-remaining": "0",
            "ratelimit-reset": str(seconds_left),
        }
        retry_after = refusal.retry_after
        if retry_after is None and refusal.status == 429:
            retry_after = seconds_left
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        if refusal.status == 429:
            answer = _error_answer(429, "rate_limit_exceeded", _RATE_LIMIT_MESSAGE)
        else:
            name = _DEFAULT_ERROR_NAMES.get(refusal.status, "internal_server_error")
            answer = _error_answer(refusal.status, name, "The service is refusing requests.")
        answer.headers = headers
        return answer

    def _refill(self) -> None:
        now = self.clock()
        elapsed = max(0.0, now - self._refilled_at)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._refilled_at = now

    def _take_token(self) -> _Answer | None:
        self._refill()
        if self._tokens + _EPSILON >= 1:
            self._tokens = max(0.0, self._tokens - 1)
            return None
        answer = _error_answer(429, "rate_limit_exceeded", _RATE_LIMIT_MESSAGE)
        wait = max(1, math.ceil((1 - self._tokens) / self.rate - _EPSILON))
        answer.headers = {**self._rate_limit_headers(), "retry-after": str(wait)}
        return answer

    def _rate_limit_headers(self) -> dict[str, str]:
        missing = max(0.0, self.burst - self._tokens)
        return {
            "ratelimit-limit": _format_rate(self.rate),
            "ratelimit-remaining": str(math.floor(self._tokens + _EPSILON)),
            "ratelimit-reset": str(max(0, math.ceil(missing / self.rate - _EPSILON))),
        }

    # -- failures and holds ----------------------------------------------------------------

    def _injected(self, failure: _Failure) -> _Answer:
        if failure.status == 429:
            answer = _error_answer(429, failure.name, _RATE_LIMIT_MESSAGE)
            answer.headers = {"retry-after": "1"}
        else:
            answer = _error_answer(failure.status, failure.name, "Injected failure.")
        answer.headers.update({name.lower(): value for name, value in failure.headers.items()})
        return answer

    def _hold(self, seconds: float) -> None:
        released = threading.Event()
        with self._changed:
            self._hanging.append(released)
            self._changed.notify_all()
        try:
            released.wait(seconds)
        finally:
            with self._changed:
                self._hanging.remove(released)
                self._changed.notify_all()

    # -- idempotency (call with the lock held) ---------------------------------------------

    def _claim_key(self, key: str, path: str, raw: bytes) -> _Answer | None:
        """None when this request may proceed (the key is now in progress); otherwise the
        answer it gets: a replay or a 409."""
        entry = self._idempotent.get(key)
        expired = (
            entry is not None
            and entry.answer is not None
            and self.clock() - entry.stored_at >= self.key_ttl_seconds
        )
        if expired:
            entry = None
        if entry is None:
            self._idempotent[key] = _IdempotentEntry(path=path, body=raw)
            return None
        if entry.answer is None:
            return _error_answer(
                409,
                "concurrent_idempotent_requests",
                "Same idempotency key used while original request is still in progress.",
            )
        if entry.path != path or entry.body != raw:
            return _error_answer(
                409,
                "invalid_idempotent_request",
                "Same idempotency key used with a different request payload.",
            )
        stored = entry.answer
        return _Answer(stored.status, stored.payload, dict(stored.headers), stored.content_type)

    def _settle_key(self, key: str, answer: _Answer | None) -> None:
        # Docs are silent on which answers a key keeps: only a request that sent something
        # (a 200) keeps its key. A rejected request created nothing, so the key stays free
        # for the corrected request instead of pinning a 422 for a day.
        if answer is None or answer.status != 200:
            self._idempotent.pop(key, None)
            return
        entry = self._idempotent[key]
        entry.answer = _Answer(answer.status, answer.payload, {}, answer.content_type)
        entry.stored_at = self.clock()

    # -- sending (call with the lock held) -------------------------------------------------

    def _send_one(self, number: int, body: Any, key: str | None) -> _Answer:
        if not isinstance(body, dict):
            return _error_answer(422, "validation_error", "The request body must be an object.")
        try:
            email = _validated(body, in_batch=False)
        except _InvalidEmail as invalid:
            return _error_answer(422, invalid.name, invalid.message)
        sent = self._record(number, email, key, batch_index=None)
        return _json_answer({"id": sent.id})

    def _send_batch(
        self, number: int, body: Any, key: str | None, headers: dict[str, str]
    ) -> _Answer:
        mode = headers.get("x-batch-validation", "strict").strip().lower()
        if mode not in ("strict", "permissive"):
            # Docs are silent on an unknown mode: rejecting it beats guessing one.
            return _error_answer(
                422,
                "validation_error",
                "The `x-batch-validation` header must be `strict` or `permissive`.",
            )
        if not isinstance(body, list):
            return _error_answer(422, "validation_error", "The request body must be an array.")
        if not 1 <= len(body) <= MAX_BATCH_EMAILS:
            # Docs are silent on an empty or oversized batch in permissive mode: the whole
            # request is rejected in either mode, since no email index is at fault.
            return _error_answer(
                422,
                "validation_error",
                f"A batch must contain between 1 and {MAX_BATCH_EMAILS} emails.",
            )
        valid: list[tuple[int, dict[str, Any]]] = []
        errors: list[dict[str, Any]] = []
        for index, item in enumerate(body):
            try:
                if not isinstance(item, dict):
                    raise _InvalidEmail("validation_error", "Each email must be an object.")
                valid.append((index, _validated(item, in_batch=True)))
            except _InvalidEmail as invalid:
                if mode == "strict":
                    # Strict mode returns only the error that failed the batch; docs are
                    # silent on its wording, so it names the email's index.
                    return _error_answer(422, invalid.name, f"emails[{index}]: {invalid.message}")
                errors.append({"index": index, "message": invalid.message})
        data = [
            {"id": self._record(number, email, key, batch_index=index).id} for index, email in valid
        ]
        if mode == "permissive":
            return _json_answer({"data": data, "errors": errors})
        return _json_answer({"data": data})

    def _record(
        self, number: int, email: dict[str, Any], key: str | None, *, batch_index: int | None
    ) -> SentEmail:
        sent = SentEmail(
            id=str(uuid.uuid4()),
            sender=email["from"],
            to=email["to"],
            subject=email["subject"],
            text=email.get("text"),
            html=email.get("html"),
            idempotency_key=key,
            batch_index=batch_index,
            request_number=number,
            cc=email["cc"],
            bcc=email["bcc"],
            headers=email.get("headers") or {},
        )
        self.sent.append(sent)
        for recipient in (*sent.to, *sent.cc, *sent.bcc):
            self.sent_to[_bare_address(recipient)] += 1
        return sent


def _rejected(method: str, path: str, body: Any, key: str | None) -> _Answer | None:
    """The answer to a request no email can come of, before its idempotency key is looked
    at; None when it may go on."""
    if path not in (EMAILS_PATH, BATCH_PATH):
        return _error_answer(404, "not_found", "The requested endpoint does not exist.")
    if method != "POST":
        # Docs are silent on GET /emails here: the real API lists and retrieves emails,
        # which no sender needs; the fake answers every non-POST as not allowed.
        return _error_answer(
            405, "method_not_allowed", "Method is not allowed for the requested path."
        )
    if body is None:
        return _error_answer(
            400, "validation_error", "The request body is missing or is not valid JSON."
        )
    if key is not None and not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        return _error_answer(400, "invalid_idempotency_key", "The key must be between 1-256 chars.")
    return None


# -- validation ------------------------------------------------------------------------------


def _bare_address(recipient: str) -> str:
    named = _NAMED_ADDRESS.fullmatch(recipient.strip())
    return named.group(1) if named else recipient.strip()


def _is_address(value: object) -> bool:
    return isinstance(value, str) and bool(_ADDRESS.fullmatch(_bare_address(value)))


def _invalid_address(field_name: str) -> _InvalidEmail:
    return _InvalidEmail(
        "validation_error",
        f"Invalid `{field_name}` field. The email address needs to follow the "
        "`email@example.com` or `Name <email@example.com>` format.",
    )


def _address_list(email: dict[str, Any], field_name: str) -> list[str]:
    value = email.get(field_name)
    if value is None:
        return []
    addresses = [value] if isinstance(value, str) else value
    if not isinstance(addresses, list) or not all(_is_address(a) for a in addresses):
        raise _invalid_address(field_name)
    return list(addresses)


def _validated(email: dict[str, Any], *, in_batch: bool) -> dict[str, Any]:
    """The email with `to`, `cc` and `bcc` as lists, or _InvalidEmail. A missing field is
    Resend's 422 missing_required_field; a malformed one its 422 validation_error (the
    status the real API answers for a bad address, though the errors page lists
    validation_error under 400 too)."""
    for required in ("from", "to", "subject"):
        if email.get(required) in (None, "", []):
            raise _InvalidEmail("missing_required_field", f"Missing `{required}` field.")
    if in_batch:
        for unsupported in ("attachments", "scheduled_at"):
            if unsupported in email:
                raise _InvalidEmail(
                    "validation_error",
                    f"The `{unsupported}` field is not supported for batch emails.",
                )
    if not _is_address(email["from"]):
        raise _invalid_address("from")
    if not isinstance(email["subject"], str):
        raise _InvalidEmail("validation_error", "The `subject` field must be a string.")
    to = _address_list(email, "to")
    if len(to) > MAX_RECIPIENTS:
        raise _InvalidEmail(
            "validation_error",
            f"Too many recipients in the `to` field: the maximum is {MAX_RECIPIENTS}.",
        )
    for body_field in ("text", "html"):
        if email.get(body_field) is not None and not isinstance(email[body_field], str):
            raise _InvalidEmail("validation_error", f"The `{body_field}` field must be a string.")
    headers = email.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _InvalidEmail("validation_error", "The `headers` field must be an object of strings.")
    return {**email, "to": to, "cc": _address_list(email, "cc"), "bcc": _address_list(email, "bcc")}


def _parsed_or_text(payload: bytes) -> Any:
    parsed = _parse_json(payload)
    return parsed if parsed is not None else payload.decode(errors="replace")


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


# -- HTTP ------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A scheduler sends from many threads at once: a deep backlog keeps the kernel from
    # refusing their connections.
    request_queue_size = 256


def _handler_for(fake: FakeResend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if len(raw) < length:
                # The client died mid-send: nothing was delivered, nothing is answered.
                self.close_connection = True
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            answer = fake._handle(self.command, path, headers, raw)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.payload)))
                self.end_headers()
                self.wfile.write(answer.payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


@contextmanager
def fake_resend(**kwargs: Any) -> Iterator[FakeResend]:
    """Start a FakeResend with these arguments, yield it, stop it."""
    fake = FakeResend(**kwargs).start()
    try:
        yield fake
    finally:
        fake.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake Resend API on 127.0.0.1.")
    parser.add_argument("--rate", type=float, default=2.0, help="requests per second")
    parser.add_argument("--burst", type=int, default=None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default="re_test_key")
    arguments = parser.parse_args(argv)
    fake = FakeResend(
        rate=arguments.rate, burst=arguments.burst, api_key=arguments.api_key, port=arguments.port
    ).start()
    print(f"RESEND_API_URL={fake.url} RESEND_API_KEY={fake.api_key}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
        print(f"{len(fake.sent)} email(s) sent, duplicates: {fake.duplicates() or 'none'}")


if __name__ == "__main__":
    main()
