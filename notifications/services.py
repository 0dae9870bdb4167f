"""Writes and state transitions of notifications.

Every function takes the tenant and looks rows up within it only, so another tenant's row
raises `DoesNotExist` exactly like a missing one. Invalid input raises `InvalidInput` with
client-safe messages per field. A notification that run_tick holds right now (its lease is
running) raises `NotificationClaimed`: changing it under a worker would race the worker's
write-back.
"""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import models
from django.db.models import QuerySet
from django.utils.timezone import now as utc_now

from dbqueue.compiled import CompiledPages, Param
from dbqueue.fences import guarded_update
from notifications.models import (
    Channel,
    Delivery,
    EmailBatch,
    Notification,
    NotificationState,
    WebhookEndpoint,
)
from notifications.recurrence import (
    CpuBudget,
    InvalidRecurrence,
    RuleTooCostly,
    admitted_first_occurrence,
    next_occurrence,
    validate_rrule,
)
from notifications.recurrence import validate_timezone as validate_tz_name
from notifications.states import Move, after, allows
from tenancy.models import Tenant
from web.errors import Conflict, InvalidInput

MAX_RECIPIENTS = 50
SUBJECT_MAX = Notification._meta.get_field("subject").max_length
_SCHEDULE_FIELDS = frozenset({"fire_at", "rrule", "timezone"})
_CONTENT_FIELDS = frozenset({"subject", "body", "channels", "email_to", "webhook_endpoint_id"})
UPDATABLE_FIELDS = _SCHEDULE_FIELDS | _CONTENT_FIELDS
_ENDPOINT_MISSING = "No webhook endpoint with this id exists in this tenant."
_NO_OCCURRENCE = (
    "The rule has no occurrence at or after fire_at (for example, its COUNT or UNTIL ends "
    "it before then)."
)


class NotificationClaimed(Conflict):
    """run_tick holds the row right now (or claimed it while the change was being made);
    retry once its lease has ended."""

    kind = "notification-claimed"

    def __init__(self) -> None:
        super().__init__(
            "The notification is being delivered right now; try again when the delivery ends."
        )


class NotificationNotParked(Conflict):
    """Only a parked or dead-lettered notification can be unparked."""

    def __init__(self) -> None:
        super().__init__("Only a parked or dead-lettered notification can be unparked.")


class NotificationHealthy(Conflict):
    """Retry is for a failing row: a scheduled (or completed) one is left as it is, since
    retrying is not "fire now"."""

    kind = "notification-not-retryable"

    def __init__(self, state: str) -> None:
        super().__init__(
            "Only a dead-lettered, backing-off or parked notification can be retried; "
            f"this one is {state}."
        )
        self.state = state


class ScheduleFinished(Conflict):
    """The recurring schedule has no occurrence left to resume at."""

    def __init__(self) -> None:
        super().__init__("The recurring schedule has no occurrence left to resume at.")


def _tenant_projects(tenant: Tenant) -> QuerySet:
    # notifications sits below projects: the Project model is reached through this app's own
    # foreign key, not imported.
    project_model = Notification._meta.get_field("project").related_model
    return project_model._default_manager.filter(tenant=tenant)


@dataclass(frozen=True)
class Announcement:
    """What a producer (e.g. a project's provisioning) tells a tenant: an email to
    `addresses` and a webhook `event` ({"type", "data"}) to each enabled endpoint."""

    addresses: Sequence[str]
    email_subject: str
    email_body: str
    event: dict[str, Any]
    event_subject: str


@dataclass(frozen=True)
class Announced:
    """One producer's announcement to one tenant, keyed by `source_key`."""

    tenant_id: UUID
    project_id: UUID
    source_key: str
    announcement: Announcement


def notifications_announce(items: Sequence[Announced], *, now: datetime) -> None:
    """Create the one-shot notifications of each announcement, due now: one read of the
    tenants' enabled endpoints and one insert, whatever their number.

    Each row's source key extends its item's `source_key` (`…:invite:<address digest>`,
    `…:event:<endpoint id>`), so a producer that runs twice creates nothing the second
    time. Addresses are checked as the API checks them: an invalid one raises InvalidInput
    and creates nothing."""
    for item in items:
        addresses = list(item.announcement.addresses)
        errors = _recipient_errors([Channel.EMAIL], addresses)
        if addresses and errors:
            raise InvalidInput(errors)
    endpoints: dict[UUID, list[UUID]] = {}
    enabled = WebhookEndpoint.objects.filter(
        tenant_id__in={item.tenant_id for item in items}, enabled=True
    )
    for tenant_id, endpoint_id in enabled.values_list("tenant_id", "id"):
        endpoints.setdefault(tenant_id, []).append(endpoint_id)
    rows = [
        row
        for item in items
        for row in _announcement_rows(item, endpoints.get(item.tenant_id, []), now=now)
    ]
    Notification.objects.bulk_create(rows, ignore_conflicts=True)


def _announcement_rows(
    item: Announced, endpoint_ids: list[UUID], *, now: datetime
) -> list[Notification]:
    announcement, source_key = item.announcement, item.source_key
    common = {
        "tenant_id": item.tenant_id,
        "project_id": item.project_id,
        "next_fire_at": now,
        "due_at": now,
        "recurrence_anchor": now,
        "occurrence": 1,
        "state": after(None, Move.CREATE),
        "timezone": "UTC",
        "created_at": now,
        "updated_at": now,
    }
    emails = [
        Notification(
            channels=[Channel.EMAIL],
            email_to=[address],
            subject=announcement.email_subject[:SUBJECT_MAX],
            body=announcement.email_body,
            source_key=f"{source_key}:invite:{_digest(address)}",
            **common,
        )
        for address in announcement.addresses
    ]
    events = [
        Notification(
            channels=[Channel.WEBHOOK],
            webhook_endpoint_id=endpoint_id,
            webhook_event=announcement.event,
            subject=announcement.event_subject[:SUBJECT_MAX],
            source_key=f"{source_key}:event:{endpoint_id}",
            **common,
        )
        for endpoint_id in endpoint_ids
    ]
    return emails + events


def _digest(address: str) -> str:
    # Keeps the key short and keeps the address itself out of an identifier.
    return hashlib.sha256(address.lower().encode()).hexdigest()[:32]


# The list's query, compiled once per page shape rather than for every page.
_NOTIFICATION_PAGES = CompiledPages(
    lambda fields: Notification.objects.filter(
        tenant_id=Param("tenant", models.UUIDField())
    ).values_list(*fields, named=True)
)


def notification_pages(*, tenant: Tenant, fields: Sequence[str], state: str | None = None) -> Any:
    """The tenant's notifications (in `state`, a NotificationState, if given) as named rows
    of `fields`, for GET /v1/notifications's cursor paginator (which orders by created_at).
    Without a state filter the SQL is compiled once per page shape
    (dbqueue.compiled.CompiledPages); a state filter's SQL reads settings
    (NOTIFICATION_MAX_ATTEMPTS), so that queryset is compiled as usual."""
    if state is None:
        return _NOTIFICATION_PAGES.of(tuple(fields), tenant=tenant.id)
    in_state = Notification.objects.filter(tenant=tenant).in_state(state)
    return in_state.values_list(*fields, named=True)


def notification_create(
    *,
    tenant: Tenant,
    channels: Sequence[str],
    subject: str,
    body: str = "",
    email_to: Sequence[str] = (),
    webhook_endpoint_id: UUID | None = None,
    fire_at: datetime | None = None,
    rrule: str = "",
    timezone: str = "UTC",
    project_id: UUID | None = None,
    now: datetime | None = None,
) -> Notification:
    """Create a notification due at `fire_at` (default `now`; a past time is due at once;
    naive = wall-clock time in `timezone`; whole seconds); a recurring one at its rule's
    first instance at or after `fire_at`."""
    now = now or utc_now()
    content = _checked_content(
        tenant=tenant,
        channels=channels,
        email_to=email_to,
        webhook_endpoint_id=webhook_endpoint_id,
        rrule=rrule,
        timezone=timezone,
    )
    if project_id is not None and not _tenant_projects(tenant).filter(pk=project_id).exists():
        raise InvalidInput({"project_id": ["No project with this id exists in this tenant."]})
    fire_at = _fire_instant(fire_at or now, content["timezone"])
    first = _first_fire_at(fire_at, content, now=now)
    return Notification.objects.create(
        tenant=tenant,
        project_id=project_id,
        subject=subject,
        body=body,
        recurrence_anchor=fire_at,
        next_fire_at=first,
        due_at=first,
        occurrence=1,
        state=after(None, Move.CREATE),
        created_at=now,
        updated_at=now,
        **content,
    )


def notification_update(
    *,
    tenant: Tenant,
    notification_id: UUID,
    changes: Mapping[str, Any],
    now: datetime | None = None,
) -> Notification:
    """Apply `changes` (keys from UPDATABLE_FIELDS) and return the updated row.

    A change of fire_at, rrule or timezone starts the schedule afresh from the new fire_at
    (default: the current one): recurrence_anchor moves there, next_fire_at to the first
    occurrence from there, the error state is cleared and the row is `scheduled` again,
    `occurrence` is kept — but for a completed row, whose occurrence was delivered: the new
    schedule fires a new occurrence, which receivers must not take for a redelivery.
    A change of content alone leaves the state as it is.
    """
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise TypeError(f"not updatable: {sorted(unknown)}")
    now = now or utc_now()
    notification = Notification.objects.get(pk=notification_id, tenant=tenant)
    if notification.is_claimed(now=now):
        raise NotificationClaimed
    merged = {
        "channels": notification.channels,
        "email_to": notification.email_to,
        "webhook_endpoint_id": notification.webhook_endpoint_id,
        "rrule": notification.rrule,
        "timezone": notification.timezone,
        **{key: value for key, value in changes.items() if key not in ("subject", "body")},
    }
    fire_at = merged.pop("fire_at", None) or notification.recurrence_anchor or now
    values: dict[str, Any] = _checked_content(tenant=tenant, **merged)
    values.update({key: changes[key] for key in ("subject", "body") if key in changes})
    if _SCHEDULE_FIELDS & set(changes):
        fire_at = _fire_instant(fire_at, values["timezone"])
        first = _first_fire_at(fire_at, values, now=now)
        values.update(
            recurrence_anchor=fire_at,
            next_fire_at=first,
            due_at=first,
            error_count=0,
            dead_letter_reason="",
            unfinished_claims=0,
            state=after(notification.state, Move.RESCHEDULE),
        )
        if notification.state == NotificationState.COMPLETED:
            values["occurrence"] = notification.occurrence + 1
    return _guarded_update(notification, values=values, now=now)


def notification_delete(*, tenant: Tenant, notification_id: UUID) -> None:
    """Delete the row. A delivery in flight finishes, but its write-back is fenced out; the
    delivery log is kept."""
    deleted, _ = Notification.objects.filter(pk=notification_id, tenant=tenant).delete()
    if not deleted:
        raise Notification.DoesNotExist


def notification_retry(
    *, tenant: Tenant, notification_id: UUID, now: datetime | None = None
) -> Notification:
    """Re-arm a failing row (dead-lettered, backing off or parked: the states a retry starts
    from) with its error state cleared and due now (`scheduled`). Raises NotificationHealthy,
    changing nothing, for a row in another state (scheduled, completed)."""
    now = now or utc_now()
    notification = Notification.objects.get(pk=notification_id, tenant=tenant)
    if not allows(notification.state, Move.RETRY):
        raise NotificationHealthy(notification.state)
    values = _rearmed(next_fire_at=now, state=after(notification.state, Move.RETRY))
    return _guarded_update(notification, values=values, now=now)


def notification_unpark(
    *, tenant: Tenant, notification_id: UUID, now: datetime | None = None
) -> Notification:
    """Put a parked or dead-lettered row back on its schedule.

    A one-shot becomes due now; a recurring row resumes at its next occurrence after `now`
    (the parked occurrence stays in the delivery log). Raises NotificationNotParked for a
    row in another state and ScheduleFinished when a recurring schedule has ended.
    """
    now = now or utc_now()
    notification = Notification.objects.get(pk=notification_id, tenant=tenant)
    if not allows(notification.state, Move.UNPARK):
        raise NotificationNotParked
    state = after(notification.state, Move.UNPARK)
    if not notification.is_recurring:
        values = _rearmed(next_fire_at=now, state=state)
        return _guarded_update(notification, values=values, now=now)
    try:
        resume_at = next_occurrence(
            rrule=notification.rrule,
            tz_name=notification.timezone,
            anchor=notification.recurrence_anchor or notification.created_at,
            after=now,
            budget=_recurrence_budget(),
        )
    except RuleTooCostly as exc:
        raise _too_costly(exc) from None
    if resume_at is None:
        raise ScheduleFinished
    values = _rearmed(next_fire_at=resume_at, state=state)
    values["occurrence"] = notification.occurrence + 1
    return _guarded_update(notification, values=values, now=now)


def _rearmed(*, next_fire_at: datetime, state: NotificationState) -> dict[str, Any]:
    # A re-armed row starts its occurrence afresh: its lateness counts from now on, not
    # from when it first failed.
    return {
        "state": state,
        "error_count": 0,
        "last_error": None,
        "dead_letter_reason": "",
        "unfinished_claims": 0,
        "next_fire_at": next_fire_at,
        "due_at": next_fire_at,
        # A retried email goes in a new batch under a new key: the old batch's key would
        # make Resend replay its old answer instead of sending.
        "email_batch": None,
    }


def _guarded_update(
    notification: Notification, *, values: dict[str, Any], now: datetime
) -> Notification:
    """Write `values` unless a claim is running or was taken since the row was read
    (NotificationClaimed); a row deleted meanwhile raises DoesNotExist."""
    if notification.is_claimed(now=now):
        raise NotificationClaimed
    values = {**values, "updated_at": now}
    rows = Notification.objects.filter(pk=notification.pk, tenant_id=notification.tenant_id)
    if not guarded_update(rows, token=notification.claim_token, now=now, **values):
        rows.only("pk").get()
        raise NotificationClaimed
    for field, value in values.items():
        setattr(notification, field, value)
    notification.claim_token += 1
    return notification


def _checked_content(
    *,
    tenant: Tenant,
    channels: Sequence[str],
    email_to: Sequence[str],
    webhook_endpoint_id: UUID | None,
    rrule: str,
    timezone: str,
) -> dict[str, Any]:
    """Validate delivery and recurrence together (they constrain each other) and return the
    model field values; raises InvalidInput listing every problem found."""
    errors: dict[str, list[str]] = {}
    channels = list(channels)
    if not channels:
        errors["channels"] = ["At least one channel is required."]
    elif not set(channels) <= set(Channel.values) or len(set(channels)) != len(channels):
        errors["channels"] = [f"Channels must be distinct values among {Channel.values}."]
    errors.update(_recipient_errors(channels, list(email_to)))
    if webhook_endpoint_id is not None:
        if not WebhookEndpoint.objects.filter(pk=webhook_endpoint_id, tenant=tenant).exists():
            errors["webhook_endpoint"] = [_ENDPOINT_MISSING]
    elif Channel.WEBHOOK in channels:
        errors["webhook_endpoint"] = ["The webhook channel needs a webhook endpoint."]
    errors.update(_recurrence_errors(rrule, timezone))
    if errors:
        raise InvalidInput(errors)
    return {
        "channels": channels,
        "email_to": list(email_to),
        "webhook_endpoint_id": webhook_endpoint_id,
        "rrule": rrule,
        "timezone": timezone,
    }


def _fire_instant(fire_at: datetime, timezone: str) -> datetime:
    """`fire_at` as an aware instant in whole seconds: a naive value is wall-clock time in
    the (checked) `timezone`, a time in a DST gap moving forward by the gap and a repeated
    one meaning the first (fold=0)."""
    if fire_at.tzinfo is None:
        fire_at = fire_at.replace(tzinfo=ZoneInfo(timezone), fold=0)
    return fire_at.astimezone(UTC).replace(microsecond=0)


def _first_fire_at(fire_at: datetime, schedule: Mapping[str, Any], *, now: datetime) -> datetime:
    """When the checked `schedule` (rrule, timezone) anchored at `fire_at` first fires;
    raises InvalidInput when its rule has no occurrence from `fire_at` on, or when its
    occurrences cannot be found within RECURRENCE_BUDGET_MS (kind rrule_too_costly)."""
    if not schedule["rrule"]:
        return fire_at
    try:
        first = admitted_first_occurrence(
            rrule=schedule["rrule"],
            tz_name=schedule["timezone"],
            anchor=fire_at,
            now=now,
            budget=_recurrence_budget(),
        )
    except RuleTooCostly as exc:
        raise _too_costly(exc) from None
    if first is None:
        raise InvalidInput({"rrule": [_NO_OCCURRENCE]})
    return first


def _recurrence_budget() -> CpuBudget:
    return CpuBudget(limit_ms=settings.RECURRENCE_BUDGET_MS)


def _too_costly(exc: RuleTooCostly) -> InvalidInput:
    return InvalidInput({"rrule": [str(exc)]}, message=str(exc), kind="rrule_too_costly")


def _recurrence_errors(rrule: str, timezone: str) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    try:
        validate_tz_name(timezone)
    except InvalidRecurrence as exc:
        errors["timezone"] = [str(exc)]
    if rrule:
        try:
            validate_rrule(rrule)
        except InvalidRecurrence as exc:
            errors["rrule"] = [str(exc)]
    return errors


def _recipient_errors(channels: list[str], email_to: list[str]) -> dict[str, list[str]]:
    if Channel.EMAIL in channels and not email_to:
        return {"email_to": ["The email channel needs at least one recipient."]}
    if len(email_to) > MAX_RECIPIENTS:
        return {"email_to": [f"At most {MAX_RECIPIENTS} recipients are allowed."]}
    for address in email_to:
        try:
            validate_email(address)
        except ValidationError:
            return {"email_to": [f"{address[:100]!r} is not a valid email address."]}
    return {}


def email_batches_before(*, before: datetime) -> QuerySet[EmailBatch]:
    """The records of Resend batches composed before `before`, which retention may delete:
    past Resend's 24 h idempotency window a record no longer prevents anything; a row still
    naming one (parked on it) sends its email in a new batch."""
    return EmailBatch.objects.filter(created_at__lt=before)


def notifications_completed_before(*, before: datetime) -> QuerySet[Notification]:
    """Completed notifications whose last occurrence fired before `before`, which retention
    may delete with the delivery log of that age: until then a client can still read them.
    A row on its schedule, dead-lettered or parked is never among them."""
    return Notification.objects.filter(state=NotificationState.COMPLETED, last_fired_at__lt=before)


def deliveries_before(*, before: datetime) -> QuerySet[Delivery]:
    """Delivery-log rows attempted before `before`, which retention may delete: the log is
    history only, no notification depends on it."""
    return Delivery.objects.filter(attempted_at__lt=before)
