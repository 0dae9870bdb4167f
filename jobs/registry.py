"""What each kind of job does: a registry from `Job.kind` to its handler, filled by the apps
that own the work (`projects` registers `provision`). jobs knows no handler's domain.

A handler has two halves. `perform(job)` makes the external side effects with no
transaction open and raises JobError for a classified failure. `apply(job, now=...)` makes
the local writes; the consumer runs it inside the same transaction that marks the job
completed (fenced on its claim token), so a run that lost its claim applies nothing.
Both halves are idempotent, keyed by the job id: a job may run more than once (a reclaim
after a crash), and re-running it must not repeat what the first run did.

What a job's dead letter or support retry means for the row it is about is not jobs'
business: `job_dead_lettered` and `job_retried` are sent (with `job` and `now`) inside the
transaction that fails the job for good or puts it back, and the owning app listens.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.dispatch import Signal

from jobs.models import Job
from outbound.categories import ErrorCategory

job_dead_lettered = Signal()
job_retried = Signal()


# What a Django task raised, as its TaskResult's `errors` show it: (exception class path,
# traceback).
TaskException = tuple[str, str]


class JobError(Exception):
    """A classified failure of a job's attempt. `str(exc)` must be safe to store: no
    secrets, no personal data, no URL query strings. `exception` is what a Django task
    raised (`jobs.tasks`), kept in the attempt's history."""

    def __init__(
        self,
        message: str,
        *,
        category: ErrorCategory,
        permanent: bool = False,
        retry_after: float | None = None,
        backpressure: bool = False,
        exception: TaskException | None = None,
    ) -> None:
        super().__init__(message)
        self.category = category
        self.permanent = permanent
        self.retry_after = retry_after
        # The other side said "later", not "no" (429, 503 with Retry-After): a deferral.
        self.backpressure = backpressure
        self.exception = exception


@dataclass(frozen=True)
class Handler:
    """`apply_many(jobs, *, now)`, when given, makes the local writes of several jobs of
    this kind at once (the same writes as `apply` for each). `max_seconds()` is the most a
    job's `perform` plus `apply` may take (its deadline plus an allowance for the local
    writes); None means unknown, and jobs are then claimed one at a time. A `task` is a job
    a client started and follows at GET /v1/tasks/{id}: its payload keeps `total` and
    `done`, which its `perform` advances with `job_progress`."""

    perform: Callable[[Job], None]
    apply: Callable[..., None]  # apply(job, *, now)
    apply_many: Callable[..., None] | None = None  # apply_many(jobs, *, now)
    max_seconds: Callable[[], float | None] = lambda: None
    task: bool = False


HANDLERS: dict[str, Handler] = {}


def register(kind: str, handler: Handler) -> None:
    """Make `handler` run the jobs of `kind` (called from the owning app's `ready()`)."""
    HANDLERS[kind] = handler


def handlers() -> list[Handler]:
    """Every registered handler."""
    return list(HANDLERS.values())


def task_kinds() -> list[str]:
    """The kinds whose jobs are tasks."""
    return [kind for kind, handler in HANDLERS.items() if handler.task]


def handler_for(kind: str) -> Handler | None:
    """The handler registered for `kind`, or None: such a job fails permanently."""
    return HANDLERS.get(kind)
