"""A fake Cloudflare Turnstile siteverify on 127.0.0.1 for integration tests, over real HTTP.

It answers the documented test secret keys like the demo's stand-in
(operations.demo.siteverify: 1x…AA passes, 2x…AA fails, 3x…AA is "token already spent"),
and real widgets as siteverify does: `widget(secret, hostname=, action=)` registers one,
`issue()` makes a token a visitor would bring; a token validates once (then
`timeout-or-duplicate`), except that a retry with the same `idempotency_key` gets the first
outcome again; an unknown or over-long (> 2048) token is `invalid-input-response`.
Failures are scripted: `fail_next(status)` answers an HTTP error, `hang_next(seconds)`
answers late. `requests` holds every request's fields, to read what was sent.
"""

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from operations.demo.siteverify import (
    FAILING_SECRET,
    PASSING_SECRET,
    SITEVERIFY_PATH,
    SPENT_SECRET,
    documented_outcome,
    failure,
    siteverify_server,
    success,
)

TOKEN_MAX_LENGTH = 2048
TEST_SECRETS = (PASSING_SECRET, FAILING_SECRET, SPENT_SECRET)


@dataclass
class Widget:
    hostname: str
    action: str = ""
    tokens: set[str] = field(default_factory=set)


class FakeSiteverify:
    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self._widgets: dict[str, Widget] = {}
        self._spent: set[str] = set()
        self._by_key: dict[str, dict[str, Any]] = {}
        self._statuses: list[int] = []
        self._delays: list[float] = []
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}{SITEVERIFY_PATH}"

    def widget(self, secret: str, *, hostname: str, action: str = "") -> None:
        self._widgets[secret] = Widget(hostname=hostname, action=action)

    def issue(self, secret: str) -> str:
        """A token the widget of `secret` gave a visitor who solved its challenge."""
        token = secrets.token_urlsafe(48)
        self._widgets[secret].tokens.add(token)
        return token

    def fail_next(self, status: int, *, times: int = 1) -> None:
        self._statuses.extend([status] * times)

    def hang_next(self, seconds: float, *, times: int = 1) -> None:
        self._delays.extend([seconds] * times)

    def outcome(self, fields: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(dict(fields))
            delay = self._delays.pop(0) if self._delays else 0.0
        if delay:
            time.sleep(delay)
        with self._lock:
            key = fields.get("idempotency_key")
            if key and key in self._by_key:
                return self._by_key[key]
            answer = self._judge(fields)
            if key:
                self._by_key[key] = answer
            return answer

    def _judge(self, fields: dict[str, str]) -> dict[str, Any]:
        secret, token = fields.get("secret", ""), fields.get("response", "")
        widget = self._widgets.get(secret)
        if widget is None or not token:
            return documented_outcome(fields)
        if len(token) > TOKEN_MAX_LENGTH or token not in widget.tokens:
            return failure("invalid-input-response")
        if token in self._spent:
            return failure("timeout-or-duplicate")
        self._spent.add(token)
        return success(hostname=widget.hostname, action=widget.action)

    def next_status(self) -> int | None:
        with self._lock:
            return self._statuses.pop(0) if self._statuses else None


@contextmanager
def fake_siteverify() -> Iterator[FakeSiteverify]:
    fake = FakeSiteverify()
    fake.server = siteverify_server(
        host="127.0.0.1", port=0, outcome=fake.outcome, fault=fake.next_status
    )
    thread = threading.Thread(target=fake.server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        thread.join()
