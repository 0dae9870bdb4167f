"""Request headers that take one value, refused when a request repeats one.

A WSGI server hands the application one value per header name: gunicorn and Django's
runserver (wsgiref) join the lines of a repeated header with "," (RFC 9110 §5.3), so two
`Idempotency-Key` lines arrive as one key that matches neither. The comma is the only trace
left, and none of these headers has a comma of its own: `X-Tenant-ID` is a UUID,
`Tickwork-Bookmark` a log position, and an `Idempotency-Key` is an opaque key whose
structured-field form (RFC 8941, `"a,b"`) may hold a comma only inside its quotes — that one
is the key's, as a structured-field parser reads it. A comma outside quotes is therefore a
repeat, and a bare key with a comma is refused rather than guessed at (quote it to send one).
"""

from rest_framework.request import Request

from web.errors import InvalidInput

SINGLE_VALUE_HEADERS = ("Idempotency-Key", "X-Tenant-ID", "Tickwork-Bookmark")


class RepeatedHeader(InvalidInput):
    kind = "repeated-header"

    def __init__(self, names: list[str]) -> None:
        message = "Send this header once."
        super().__init__(
            {name: [message] for name in names},
            message=f"The request repeats a header that takes one value: {', '.join(names)}.",
        )


def is_repeated(value: str) -> bool:
    """True when `value` is several header lines joined with commas: a comma outside a
    double-quoted string (whose backslash escapes are skipped)."""
    quoted = escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            return True
    return False


def single_header(request: Request, name: str) -> str | None:
    """The value of header `name`, None when absent; RepeatedHeader when it was repeated."""
    value = request.headers.get(name)
    if value is not None and is_repeated(value):
        raise RepeatedHeader([name])
    return value


def refuse_repeated_headers(request: Request) -> None:
    """RepeatedHeader naming every single-value header the request repeated. The
    authentication calls it once the caller is known, so an anonymous caller gets its 401
    first, as with any malformed header; a route without authentication reads its
    Idempotency-Key through `single_header`."""
    repeated = [
        name for name in SINGLE_VALUE_HEADERS if is_repeated(request.headers.get(name) or "")
    ]
    if repeated:
        raise RepeatedHeader(repeated)
