"""RFC 9457 problem details for every non-2xx answer under /v1/.

One place maps errors to HTTP: DRF's exception handler for everything raised inside a view,
Django's handler404/handler500 for routing misses and crashes, and a middleware for bodies
that are too large before any view runs.
"""

import io
import logging
import sys
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, RequestDataTooBig
from django.core.handlers.wsgi import LimitedStream
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from web.errors import (
    Conflict,
    DomainError,
    Exhausted,
    Forbidden,
    InvalidInput,
    Unavailable,
    Unprocessable,
)
from web.problem_types import problem_title

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_BASE = "https://tickwork.dev/problems/"

# The problem type of an error that names none: its HTTP status's.
_TYPES = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    413: "request-too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "throttled",
    500: "internal-error",
    503: "unavailable",
}


# The one mapping from the services' error families to HTTP.
_DOMAIN_STATUSES: tuple[tuple[type[DomainError], int], ...] = (
    (InvalidInput, 400),
    (Forbidden, 403),
    (Conflict, 409),
    (Unprocessable, 422),
    (Unavailable, 503),
    (Exhausted, 429),
    (DomainError, 400),
)

_OTHER_SCHEME = (
    "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <token>'."
)


class ProblemError(exceptions.APIException):
    """An error raised by the web layer itself (outside any service) with its status."""

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        kind: str | None = None,
        errors: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        members: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail=detail)
        self.status_code = status_code
        self.kind = kind
        self.errors = errors
        self.headers = headers or {}
        self.members = members


def problem_body(
    status_code: int,
    detail: str,
    *,
    kind: str | None = None,
    errors: dict[str, Any] | None = None,
    members: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The problem document; `kind` (default: the HTTP status's) ends its type URI and
    names its one title (`web.problem_types`); `members` are extension members beside the
    standard ones."""
    kind = kind or _TYPES.get(status_code, "error")
    body: dict[str, Any] = {
        **(members or {}),
        "type": PROBLEM_BASE + kind,
        "title": problem_title(kind),
        "status": status_code,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    return body


def problem_response(
    status_code: int,
    detail: str,
    *,
    kind: str | None = None,
    errors: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """A plain Django response carrying a problem document (used outside DRF views)."""
    response = JsonResponse(
        problem_body(status_code, detail, kind=kind, errors=errors),
        status=status_code,
        content_type=PROBLEM_CONTENT_TYPE,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _flatten_detail(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _flatten_detail(detail[0])
    if isinstance(detail, dict):
        return "The request has invalid fields."
    return str(detail)


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: every API error becomes an RFC 9457 document."""
    # Imported here: rest_framework.views imports the permission classes, which import us.
    from rest_framework.views import exception_handler

    if isinstance(exc, DomainError):
        exc = _domain_problem(exc)
    elif isinstance(exc, RequestDataTooBig):
        exc = ProblemError(413, f"The request body exceeds {settings.MAX_REQUEST_BYTES} bytes.")
    elif isinstance(exc, Http404 | ObjectDoesNotExist):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    errors = members = None
    kind = getattr(exc, "kind", None)
    if isinstance(exc, ProblemError):
        detail, errors, members = str(exc.detail), exc.errors, exc.members
        for name, value in exc.headers.items():
            response[name] = value
    elif isinstance(exc, exceptions.ValidationError):
        detail = "The request has invalid fields."
        errors = (
            cast(dict[str, Any], exc.detail)
            if isinstance(exc.detail, dict)
            else {"non_field_errors": exc.detail}
        )
        kind = InvalidInput.kind
    else:
        detail = _flatten_detail(cast(exceptions.APIException, exc).detail)
    if isinstance(exc, exceptions.NotAuthenticated) and _has_authorization(context):
        detail = _OTHER_SCHEME
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        response.status_code = status.HTTP_401_UNAUTHORIZED
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
    if wait is not None:
        response["Retry-After"] = str(max(1, int(wait + 0.999)))
    response.data = problem_body(
        response.status_code, detail, kind=kind, errors=errors, members=members
    )
    response.content_type = PROBLEM_CONTENT_TYPE
    _render_as_json(context)
    return response


def _render_as_json(context: dict[str, Any]) -> None:
    """A problem is JSON even from a view that renders something else (the schema's YAML)."""
    request = context.get("request")
    if request is not None:
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = PROBLEM_CONTENT_TYPE


def _domain_problem(exc: DomainError) -> ProblemError:
    status_code = next((code for family, code in _DOMAIN_STATUSES if isinstance(exc, family)))
    headers = None
    if isinstance(exc, Unavailable | Exhausted):
        headers = {"Retry-After": str(exc.retry_after)}
    return ProblemError(
        status_code,
        str(exc),
        kind=exc.kind,
        errors=exc.errors,
        headers=headers,
        members=exc.members,
    )


def _has_authorization(context: dict[str, Any]) -> bool:
    """True when the request sent credentials that no authentication class took: a scheme
    other than Bearer (the header's value is never echoed: it may be a bare secret)."""
    request = context.get("request")
    return request is not None and bool(request.META.get("HTTP_AUTHORIZATION", "").strip())


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/v1/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return problem_response(404, "No resource matches this URL.")
    return problem_response(404, "Not found.")


# How long a client should wait before retrying when the database cannot be reached.
DATABASE_RETRY_AFTER_SECONDS = 5
# SQLite's errors that say the file is busy or cannot be opened now, not that a statement is
# wrong ("no such table" is an OperationalError too, and a bug).
_SQLITE_UNAVAILABLE = ("database is locked", "unable to open database file", "disk I/O error")


def database_unavailable(exc: BaseException | None) -> bool:
    """Whether `exc` says the database cannot serve now (unreachable, shutting down, out of
    connections, busy) rather than that the server is wrong: a retry can succeed."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if type(cause).__module__.startswith("psycopg"):
        return True
    return any(message in str(exc) for message in _SQLITE_UNAVAILABLE)


def server_error(request: HttpRequest) -> HttpResponse:
    # Called while Django handles the uncaught exception: it is the one in flight.
    if database_unavailable(sys.exc_info()[1]):
        return problem_response(
            503,
            "The database cannot be reached now. Retry shortly.",
            kind="unavailable",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
        )
    return problem_response(500, "The server could not complete the request. It has been logged.")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem_response(400, "The request could not be understood.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem_response(403, "You may not perform this action.")


class RequestSizeLimitMiddleware:
    """Reject bodies over MAX_REQUEST_BYTES by their declared length, before a view reads them.

    Chunked bodies (no Content-Length) are read here up to the limit and buffered.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            return problem_response(400, "Content-Length is not a number.")
        too_large = length > settings.MAX_REQUEST_BYTES
        if not length and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            too_large = _buffer_chunked_body(request)
        if too_large:
            return problem_response(
                413, f"The request body exceeds {settings.MAX_REQUEST_BYTES} bytes."
            )
        return self.get_response(request)


def _buffer_chunked_body(request: HttpRequest) -> bool:
    """Read a chunked body (no Content-Length) up to the limit; True when it is larger.

    Django reads only Content-Length bytes, so without this a chunked body would be seen as
    empty; buffering it (it is at most MAX_REQUEST_BYTES) lets the views parse it as usual.
    """
    stream = request.META.get("wsgi.input")
    if stream is None:
        return False
    limit = settings.MAX_REQUEST_BYTES
    chunks: list[bytes] = []
    received = 0
    while received <= limit:
        chunk = stream.read(limit + 1 - received)
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    if received > limit:
        return True
    body = b"".join(chunks)
    request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]
    request.META["CONTENT_LENGTH"] = str(len(body))
    return False
