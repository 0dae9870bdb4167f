"""A local stand-in for Cloudflare Turnstile's siteverify, for the demo (and the base of the
tests' fake): it answers the documented test secret keys as Cloudflare documents them
(developers.cloudflare.com/turnstile/troubleshooting/testing/), so the demo's signup runs
with `TURNSTILE_SECRET_KEY=1x0000000000000000000000000000000AA` and nothing leaves the
machine.

- `1x0000000000000000000000000000000AA`: always passes (for any non-empty response token,
  such as the docs' dummy `XXXX.DUMMY.TOKEN.XXXX`), on the host name `example.com`;
- `2x0000000000000000000000000000000AA`: always fails (`invalid-input-response`);
- `3x0000000000000000000000000000000AA`: the token is already spent (`timeout-or-duplicate`);
- any other secret: `invalid-input-secret`; no secret: `missing-input-secret`; no response:
  `missing-input-response`.

Requests are form-encoded (or JSON) POSTs to /turnstile/v0/siteverify; answers are JSON.
"""

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

SITEVERIFY_PATH = "/turnstile/v0/siteverify"
PASSING_SECRET = "1x0000000000000000000000000000000AA"  # noqa: S105 - Cloudflare's public test key
FAILING_SECRET = "2x0000000000000000000000000000000AA"  # noqa: S105
SPENT_SECRET = "3x0000000000000000000000000000000AA"  # noqa: S105
DUMMY_TOKEN = "XXXX.DUMMY.TOKEN.XXXX"  # noqa: S105 - the docs' dummy widget response
TEST_HOSTNAME = "example.com"
MAX_BODY_BYTES = 64 * 1024

Outcome = Callable[[dict[str, str]], dict[str, Any]]


def failure(*codes: str) -> dict[str, Any]:
    return {"success": False, "error-codes": list(codes), "messages": []}


def success(*, hostname: str, action: str = "", cdata: str = "") -> dict[str, Any]:
    return {
        "success": True,
        "error-codes": [],
        "challenge_ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "hostname": hostname,
        "action": action,
        "cdata": cdata,
        "metadata": {"interactive": False},
    }


def documented_outcome(form: dict[str, str]) -> dict[str, Any]:
    """Siteverify's answer for the documented test secrets (see the module docstring)."""
    secret, response = form.get("secret", ""), form.get("response", "")
    if not secret:
        return failure("missing-input-secret")
    if not response:
        return failure("missing-input-response")
    if secret == PASSING_SECRET:
        return success(hostname=TEST_HOSTNAME)
    if secret == FAILING_SECRET:
        return failure("invalid-input-response")
    if secret == SPENT_SECRET:
        return failure("timeout-or-duplicate")
    return failure("invalid-input-secret")


def parse_fields(body: bytes, content_type: str) -> dict[str, str] | None:
    """The request's fields (form-encoded or JSON), or None when it is neither."""
    try:
        if content_type.startswith("application/json"):
            data = json.loads(body)
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
        return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    except (ValueError, UnicodeDecodeError):
        return None


def _no_fault() -> int | None:
    return None


def siteverify_server(
    *,
    host: str,
    port: int,
    outcome: Outcome = documented_outcome,
    fault: Callable[[], int | None] = _no_fault,
) -> ThreadingHTTPServer:
    """A siteverify on host:port answering each POST with `outcome(fields)`, or with the
    HTTP error status `fault()` names (a test's scripted outage)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass  # a request line would show nothing useful; the body holds the secret

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY_BYTES))
            fields = parse_fields(body, self.headers.get("Content-Type", ""))
            status = fault()
            if status is not None:
                _answer(self, status, failure("internal-error"))
            elif self.path.split("?")[0] != SITEVERIFY_PATH:
                _answer(self, 404, {"success": False, "error-codes": ["bad-request"]})
            elif fields is None:
                _answer(self, 400, failure("bad-request"))
            else:
                _answer(self, 200, outcome(fields))

    return ThreadingHTTPServer((host, port), Handler)


def _answer(handler: BaseHTTPRequestHandler, status: int, document: dict[str, Any]) -> None:
    payload = json.dumps(document).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    # The client may have given up waiting (a test of its timeout).
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        handler.wfile.write(payload)
