"""Read-your-writes bookmarks on every API answer, as Cloudflare D1's Sessions API has them.

Every `/v1/` answer carries `Tickwork-Bookmark: <LSN>`: after a write, the primary's WAL
position once the write has committed; after a read, a position the read was at least as
fresh as. A request that sends a bookmark is read from a replica that has replayed it, or
else from the primary (D1's `first-unconstrained` without one); `Tickwork-Consistency:
primary` reads from the primary (D1's `first-primary`). A replica that fails mid-request
is marked down and the request's view runs again on the primary: a replica never fails a
request.
"""

import logging
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
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
        raise ProblemError(
            400, problem, kind="bad-routing-header", title="Invalid consistency header"
        )


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
            response[BOOKMARK_HEADER] = str(replicas.primary_position(fresh=True))
            return response
        routing = replicas.route_read(bookmark, primary_only=primary_only)
        token = replicas.routing.set(routing)
        try:
            response = self.get_response(request)
        finally:
            replicas.routing.reset(token)
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
