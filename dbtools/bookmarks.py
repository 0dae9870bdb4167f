"""Read-your-writes bookmarks on the API's answers, as Cloudflare D1's Sessions API has them.

Every `/v1/` answer to an authenticated caller carries `Tickwork-Bookmark: <LSN>`: after a
write, the primary's WAL position once the write has committed; after a read, a position
the read was at least as fresh as. An anonymous caller, and every caller of a public route
(signup, sign-in, invitations, unsubscribe), gets none: a bookmark tells a client about its
own writes, and the log's growth between two anonymous answers would tell a stranger what
the database did for someone else (whether an address has an account).

A request that sends a bookmark is read from a replica that has replayed it, or else from
the primary (D1's `first-unconstrained` without one); `Tickwork-Consistency:
primary` reads from the primary (D1's `first-primary`). A replica that fails mid-request
is marked down and the request's view runs again on the primary: a replica never fails a
request.
"""

import logging
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import AllowAny
from rest_framework.request import Request

from dbtools import replicas
from web.problems import ProblemError

logger = logging.getLogger(__name__)

BOOKMARK_HEADER = "Tickwork-Bookmark"
CONSISTENCY_HEADER = "Tickwork-Consistency"
PRIMARY = "primary"
_READS = ("GET", "HEAD")


class BadRoutingHeader(ValueError):
    pass


def requested_routing(request: HttpRequest) -> tuple[replicas.Lsn | None, bool]:
    """(the bookmark sent, whether the primary is asked for); BadRoutingHeader when either
    header is malformed."""
    bookmark = request.headers.get(BOOKMARK_HEADER)
    consistency = request.headers.get(CONSISTENCY_HEADER)
    if consistency is not None and consistency != PRIMARY:
        raise BadRoutingHeader(f"{CONSISTENCY_HEADER} must be {PRIMARY!r} when sent.")
    if bookmark is None:
        return None, consistency is not None
    try:
        return replicas.Lsn.parse(bookmark), consistency is not None
    except ValueError:
        raise BadRoutingHeader(
            f"{BOOKMARK_HEADER} must be a log position as an earlier answer gave it, "
            "e.g. 0/1A2B3C4D."
        ) from None


def refuse_malformed_routing(request: Request) -> None:
    """400 when the request's routing headers were malformed; the authentication calls it
    once the caller is known. A method the view does not allow keeps its 405."""
    problem = getattr(request, "routing_header_problem", None)
    view = request.parser_context.get("view")
    if view is not None and request.method not in view.allowed_methods:
        return
    if problem is not None:
        raise ProblemError(400, problem, kind="bad-routing-header")


def mark_known_caller(request: Request) -> None:
    """The authentication knows the caller: the answer, even a refusal of its headers, may
    carry a bookmark."""
    request._request.known_caller = True  # type: ignore[attr-defined]


def _tells_bookmark(request: HttpRequest) -> bool:
    """Whether the answer may carry a bookmark: the caller was authenticated (DRF sets the
    user it authenticated on the request) and the route is not a public one."""
    user = getattr(request, "user", None)
    known = getattr(request, "known_caller", False)
    if not known and (user is None or not user.is_authenticated):
        return False
    match = request.resolver_match
    return not route_is_public(getattr(match.func, "cls", None) if match is not None else None)


def route_is_public(view: Any) -> bool:
    """A route open to anonymous callers (signup, sign-in, invitations, unsubscribe): its
    answers never carry a bookmark."""
    return any(permission is AllowAny for permission in getattr(view, "permission_classes", ()))


class BookmarkMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/v1/"):
            return self.get_response(request)
        try:
            bookmark, primary_only = requested_routing(request)
        except BadRoutingHeader as exc:
            # Refused once the caller is authenticated (refuse_malformed_routing): an
            # anonymous request gets its 401 first, as with every other malformed header.
            request.routing_header_problem = str(exc)  # type: ignore[attr-defined]
            bookmark, primary_only = None, True
        if request.method not in _READS:
            response = self.get_response(request)
            if _tells_bookmark(request):
                response[BOOKMARK_HEADER] = str(replicas.primary_position(fresh=True))
            return response
        routing = replicas.route_read(bookmark, primary_only=primary_only)
        token = replicas.routing.set(routing)
        try:
            response = self.get_response(request)
        finally:
            replicas.routing.reset(token)
        if _tells_bookmark(request):
            response[BOOKMARK_HEADER] = str(routing.fresh_as)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A replica that fails while a view reads from it: the view runs again, on the
        primary (a read has nothing to undo)."""
        routing = replicas.routing.get()
        if routing is None or routing.read_alias == DEFAULT_DB_ALIAS:
            return None
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        logger.warning(
            "replica %s failed mid-request (%s); reading from the primary",
            routing.read_alias,
            next(iter(str(exception).splitlines()), type(exception).__name__),
        )
        replicas.mark_down(routing.read_alias)
        fallback = replicas.on_primary(None)
        routing.read_alias, routing.fresh_as = (
            fallback.read_alias,
            max(fallback.fresh_as, routing.fresh_as),
        )
        match = request.resolver_match
        if match is None:
            return None
        return match.func(request, *match.args, **match.kwargs)
