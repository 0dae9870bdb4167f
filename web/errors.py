"""The one error model of the services: a domain error names its kind of problem, never an
HTTP status. `web.problems` maps each family below to its status in one place.

Services raise these (or Django's `DoesNotExist`, which answers like a missing resource);
views never build problem bodies by hand.
"""

from typing import Any


class DomainError(Exception):
    """A request the domain refuses. `kind` is stable (it ends the problem's type URI);
    `str(exc)` is safe to show the client; `errors` maps fields to client-safe messages.
    The problem's title is the kind's, in `web.problem_types`."""

    kind = "domain-error"
    # Extension members of the problem document (RFC 9457 §3.2), client-safe.
    members: dict[str, Any] | None = None

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        errors: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        self.errors = errors


class InvalidInput(DomainError):
    """The input cannot be applied; `errors` lists every problem found, per field."""

    kind = "validation-error"

    def __init__(
        self,
        errors: dict[str, list[str]],
        *,
        message: str = "The request has invalid fields.",
        kind: str | None = None,
    ) -> None:
        super().__init__(message, kind=kind, errors=errors)


class Forbidden(DomainError):
    kind = "forbidden"


class Conflict(DomainError):
    """The resource's current state does not allow this now."""

    kind = "conflict"


class Unprocessable(DomainError):
    """Well-formed, but contradicts what was stored before (e.g. a reused idempotency key)."""

    kind = "unprocessable"


class Unavailable(DomainError):
    """A service the request depends on cannot answer now; retry after `retry_after`
    seconds. Never a reason to let the request through unchecked."""

    kind = "unavailable"

    def __init__(self, message: str, *, retry_after: int, kind: str | None = None) -> None:
        super().__init__(message, kind=kind)
        self.retry_after = retry_after


class Exhausted(DomainError):
    """An allowance for a period is used up; it comes back after `retry_after` seconds."""

    kind = "exhausted"

    def __init__(self, message: str, *, retry_after: int, kind: str | None = None) -> None:
        super().__init__(message, kind=kind)
        self.retry_after = retry_after
