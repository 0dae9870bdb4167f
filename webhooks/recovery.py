"""Recovering a webhook endpoint: every delivery to it in a window that never succeeded is
queued again, once, in the order the deliveries were created.

What counts: a one-shot notification (no `rrule`: a message delivery is one) for the
endpoint, created in [since, until), that is `dead_lettered` or `parked` — given up, off the
schedule — and whose webhook channel was not delivered. A row still `scheduled` or
`backing_off` is on its way and is left alone; a recurring row goes on with its own
schedule (its failed occurrence is in the delivery log).

The recovery is a task, a row of the jobs outbox (kind `recover_endpoint`), so it survives a
crash of its worker. Its `perform` walks the window in chunks ordered by (created_at, id);
each chunk re-queues its rows and moves the task's cursor and `done` count in one
transaction, fenced on the job's claim and holding the endpoint enabled (a task whose
endpoint was disabled meanwhile stops, dead-lettered with category `endpoint_disabled`).
A worker that dies mid-way leaves the cursor at the last committed chunk; the next claimant
resumes there, so no delivery is queued twice even when a re-queued one has failed again
meanwhile.
"""

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from django.utils.timezone import now as utc_now

from dbtools.fields import column_of, concrete_field
from delivery.conflicts import EndpointDisabled
from delivery.models import Channel, DeliveryOutcome, Notification, WebhookEndpoint
from delivery.outbox import rearmed
from delivery.states import Move, NotificationState, after
from jobs.models import Job
from jobs.registry import Handler, JobError
from jobs.services import job_enqueue, job_progress
from outbound.categories import ErrorCategory
from tenancy.models import Tenant
from web.errors import InvalidInput

RECOVER_KIND = "recover_endpoint"
# How far back a recovery may reach (Svix's limit).
RECOVER_MAX_DAYS = 14
# Rows re-queued per transaction: small enough to keep each transaction short, large
# enough that 10,000 rows are a few dozen statements.
CHUNK_SIZE = 500
# One chunk's worst case (three statements over CHUNK_SIZE rows): the task renews its own
# lease with every chunk, so this is what its lease must cover at a time.
CHUNK_MAX_SECONDS = 1.0
RECOVERABLE = (NotificationState.DEAD_LETTERED, NotificationState.PARKED)


def recoverable(*, tenant_id: UUID, endpoint_id: UUID, since: datetime, until: datetime) -> Any:
    """The deliveries to the endpoint created in [since, until) that never succeeded."""
    webhook = Channel.WEBHOOK.value
    # A row without the key has not delivered it; NOT (NULL = …) would drop such a row.
    undelivered = Q(**{f"channel_state__{webhook}__isnull": True}) | ~Q(
        **{f"channel_state__{webhook}": DeliveryOutcome.DELIVERED.value}
    )
    return (
        Notification.objects.filter(
            tenant_id=tenant_id,
            webhook_endpoint_id=endpoint_id,
            rrule="",
            state__in=RECOVERABLE,
            created_at__gte=since,
            created_at__lt=until,
        )
        .filter(undelivered)
        .order_by("created_at", "id")
    )


def endpoint_recover(
    *,
    tenant: Tenant,
    endpoint_id: UUID,
    since: datetime,
    until: datetime | None = None,
    now: datetime | None = None,
) -> Job:
    """Start the recovery of the tenant's endpoint over [since, until) (until: now; a
    later one is taken as now, for nothing created after now exists yet) as a pending task.
    Raises InvalidInput for a window that starts more than RECOVER_MAX_DAYS back or does
    not end after it starts, DoesNotExist for an endpoint the tenant does not have, and
    EndpointDisabled for a disabled one (nothing is enqueued)."""
    now = now or utc_now()
    until = now if until is None else min(until, now)
    errors: dict[str, list[str]] = {}
    if since < now - timedelta(days=RECOVER_MAX_DAYS):
        errors["since"] = [f"Must be at most {RECOVER_MAX_DAYS} days back."]
    elif since >= until:
        errors["since"] = ["Must be before until (and before now)."]
    if errors:
        raise InvalidInput(errors)
    endpoint = WebhookEndpoint.objects.only("id", "enabled").get(pk=endpoint_id, tenant=tenant)
    if not endpoint.enabled:
        raise EndpointDisabled()
    total = recoverable(
        tenant_id=tenant.pk, endpoint_id=endpoint.pk, since=since, until=until
    ).count()
    payload = {
        "endpoint_id": str(endpoint.pk),
        "since": since.isoformat(),
        "until": until.isoformat(),
        "total": total,
        "done": 0,
        "queued": 0,
        "cursor": None,
    }
    return job_enqueue(tenant=tenant, kind=RECOVER_KIND, payload=payload, now=now)


def recover_perform(job: Job) -> None:
    """Re-queue the task's rows from its cursor on, chunk by chunk (see the module
    docstring). Raises JobError when the claim was lost: the chunk in hand is rolled back
    and the new claimant carries on from the last committed cursor."""
    while recover_chunk(job, now=utc_now()):
        pass


def recover_chunk(job: Job, *, now: datetime) -> bool:
    """Re-queue the next chunk and advance the cursor, in one transaction fenced on the
    job's claim; False once the window is done."""
    payload = job.payload
    rows = _after_cursor(
        recoverable(
            tenant_id=job.tenant_pk,
            endpoint_id=UUID(payload["endpoint_id"]),
            since=_instant(payload["since"]),
            until=_instant(payload["until"]),
        ),
        payload["cursor"],
    )
    with transaction.atomic():
        _hold_enabled(UUID(payload["endpoint_id"]))
        chunk = list(rows.values_list("id", "claim_token", "created_at")[:CHUNK_SIZE])
        if not chunk:
            return False
        last_id, _, last_created = chunk[-1]
        tokens = [(row_id, token) for row_id, token, _ in chunk]
        queued = requeue(tokens, first=payload["done"], now=now)
        progress = {
            **payload,
            "done": payload["done"] + len(chunk),
            "queued": payload["queued"] + queued,
            "cursor": [last_created.isoformat(), str(last_id)],
        }
        if not job_progress(job=job, now=now, payload=progress):
            # Raised inside the block: the chunk's re-queue is rolled back with it.
            raise JobError("the task was claimed again", category=ErrorCategory.INTERNAL)
    return len(chunk) == CHUNK_SIZE


def _hold_enabled(endpoint_id: UUID) -> None:
    """Lock the endpoint's row for the chunk's transaction, or raise a permanent JobError
    when it was disabled since the task started: rows queued again for a disabled endpoint
    would only be parked again. Under the lock, a retirement waits for the chunk to commit
    and then parks what it queued; a retirement that committed first stops the task."""
    enabled = (
        WebhookEndpoint.objects.select_for_update(no_key=True)
        .filter(pk=endpoint_id, enabled=True)
        .exists()
    )
    if not enabled:
        raise JobError(
            "the endpoint was disabled: enable it, then recover again",
            category=ErrorCategory.ENDPOINT_DISABLED,
            permanent=True,
        )


def _after_cursor(rows: QuerySet[Notification], cursor: list[str] | None) -> Any:
    if cursor is None:
        return rows
    created, row_id = _instant(cursor[0]), UUID(cursor[1])
    return rows.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=row_id))


def requeue(rows: list[tuple[UUID, int]], *, first: int, now: datetime) -> int:
    """Put the rows ((id, claim token) as read) back on the schedule, due now and one
    microsecond apart in the order given (the `first`-th of the task's rows first), so the
    tick delivers them in creation order (a recovery's, or an endpoint's parked rows when it
    is enabled again). Fenced on each row's token, which it bumps, as a
    guarded update does: a row changed since it was read (retried by hand) is not touched.

    One statement, its per-row values joined from a VALUES list (a CASE per column would
    compare every row with every branch)."""
    meta, quote = Notification._meta, connection.ops.quote_name
    values = rearmed(next_fire_at=now, state=after(NotificationState.DEAD_LETTERED, Move.RETRY))
    constant = {
        name: value for name, value in values.items() if name not in ("next_fire_at", "due_at")
    }
    constant["updated_at"] = now
    sets = [f"{quote(column_of(concrete_field(Notification, name)))} = %s" for name in constant]
    params: list[Any] = [
        concrete_field(Notification, name).get_db_prep_save(value, connection)
        for name, value in constant.items()
    ]
    sets += ["claimed_until = NULL", "claim_token = claim_token + 1"]
    sets += [f"{quote(column)} = v.column3" for column in ("next_fire_at", "due_at")]
    pk, token, due = (
        concrete_field(Notification, name) for name in ("id", "claim_token", "next_fire_at")
    )
    if connection.vendor == "postgresql":
        casts = [f"CAST(%s AS {field.cast_db_type(connection)})" for field in (pk, token, due)]
        row = f"({', '.join(casts)})"
    else:
        row = "(%s, %s, %s)"
    for index, (row_id, claim_token) in enumerate(rows):
        at = now + timedelta(microseconds=first + index)
        params += [
            pk.get_db_prep_value(row_id, connection),
            claim_token,
            due.get_db_prep_save(at, connection),
        ]
    table = quote(meta.db_table)
    sql = (
        # Only the model's own names are formatted in; every value binds.
        f"UPDATE {table} SET {', '.join(sets)} "  # noqa: S608
        f"FROM (VALUES {', '.join([row] * len(rows))}) AS v "
        f"WHERE {table}.{quote(column_of(pk))} = v.column1 AND {table}.claim_token = v.column2"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _instant(text: str) -> datetime:
    value = parse_datetime(text)
    if value is None:
        raise ValueError(f"not an ISO 8601 instant: {text!r}")
    return value


def recover_apply(job: Job, *, now: datetime) -> None:
    """Nothing is left to write when the task completes: each chunk wrote its rows."""


RECOVER = Handler(
    perform=recover_perform,
    apply=recover_apply,
    max_seconds=lambda: CHUNK_MAX_SECONDS,
    task=True,
)
