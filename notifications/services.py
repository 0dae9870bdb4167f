"""Writes and state transitions of notifications.

Every function takes the tenant and looks rows up within it only, so another tenant's row
raises `DoesNotExist` exactly like a missing one. Invalid input raises `InvalidInput` with
client-safe messages per field (the checks live in delivery.validation). A
notification that run_tick holds right now (its lease is running) raises
`NotificationClaimed`: changing it under a worker would race the worker's write-back.

A message's delivery (a row with `message_id`) belongs to its message: it is not listed
here, and an edit, retry, unpark or delete of one raises `MessageDelivery`, changing
nothing; the message's resend and the endpoint's recovery act on it.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import models, transaction
from django.db.models import QuerySet
from django.utils.timezone import now as utc_now

from dbqueue.fences import guarded_update
from dbtools.compiled import Param
from dbtools.pages import CompiledPages
from delivery.conflicts import (
    EndpointDeleted,
    MessageDelivery,
    NotificationClaimed,
    NotificationFinished,
    NotificationHealthy,
    NotificationNotParked,
    ScheduleFinished,
)
from delivery.models import (
    Channel,
    Delivery,
    DeliveryOutcome,
    Notification,
    NotificationSource,
    NotificationState,
)
from delivery.outbox import digest_join, rearmed
from delivery.recurrence import RuleTooCostly, next_occurrence
from delivery.states import CLAIMABLE, Move, after, allows
from delivery.validation import (
    check_digest,
    checked_content,
    fire_instant,
    first_fire_at,
    recurrence_budget,
    too_costly,
)
from tenancy.models import Tenant
from tenancy.plans import tenant_limits
from tenancy.quotas import charge
from web.errors import InvalidInput

_SCHEDULE_FIELDS = frozenset({"fire_at", "rrule", "timezone"})
_CONTENT_FIELDS = frozenset(
    {"subject", "body", "channels", "email_to", "webhook_endpoint_id", "recipients", "category"}
)
UPDATABLE_FIELDS = _SCHEDULE_FIELDS | _CONTENT_FIELDS


def _tenant_projects(tenant: Tenant) -> QuerySet:
    # notifications sits below projects: the Project model is reached through this app's own
    # foreign key, not imported.
    project_model = Notification._meta.get_field("project").related_model
    return project_model._default_manager.filter(tenant=tenant)


# The list's query, compiled once per page shape rather than for every page.
_NOTIFICATION_PAGES = CompiledPages(
    lambda fields: _own_rows(
        Notification.objects.filter(tenant_id=Param("tenant", models.UUIDField()))
    ).values_list(*fields, named=True)
)


def _own_rows(rows: QuerySet[Notification]) -> QuerySet[Notification]:
    """`rows` without messages' deliveries, which their messages list."""
    return rows.filter(message__isnull=True)


def notification_pages(
    *,
    tenant: Tenant,
    fields: Sequence[str],
    state: str | None = None,
    source: str | None = None,
) -> Any:
    """The tenant's notifications, messages' deliveries left out (in `state`, a
    NotificationState, and from `source`, a NotificationSource, if given) as named rows of
    `fields`, for GET /v1/notifications's cursor paginator (which orders by created_at).
    Without a filter the SQL is compiled once per page shape (dbtools.pages.CompiledPages);
    a filtered queryset is compiled as usual (a state filter's SQL reads settings)."""
    if state is None and source is None:
        return _NOTIFICATION_PAGES.of(tuple(fields), tenant=tenant.id)
    rows = Notification.objects.filter(tenant=tenant)
    if state is not None:
        rows = rows.in_state(state)
    if source is not None:
        rows = rows.filter(source=NotificationSource(source))
    return _own_rows(rows).values_list(*fields, named=True)


def delivery_log(
    *,
    tenant: Tenant,
    notification_id: UUID | None = None,
    endpoint_id: UUID | None = None,
    message_id: UUID | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
) -> QuerySet[Delivery]:
    """The tenant's delivery log, narrowed by each filter given (`message_id`: the log of
    that message's deliveries, resends included; `since`: attempted at or after it); it
    outlives deleted notifications and endpoints."""
    deliveries = Delivery.objects.filter(tenant=tenant)
    if message_id is not None:
        deliveries = deliveries.of_message(tenant_id=tenant.id, message_id=message_id)
    if notification_id is not None:
        deliveries = deliveries.filter(notification_id=notification_id)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    if outcome is not None:
        deliveries = deliveries.filter(outcome=outcome)
    if since is not None:
        deliveries = deliveries.filter(attempted_at__gte=since)
    return deliveries


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
    source: NotificationSource = NotificationSource.API,
    recipients: Sequence[str] = (),
    category: str = "",
    digest: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Notification:
    """Create a notification due at `fire_at` (default `now`; a past time is due at once;
    naive = wall-clock time in `timezone`; whole seconds); a recurring one at its rule's
    first instance at or after `fire_at`. `source` says who made it (the product's own
    e-mails are `system`). EndpointDisabled for a disabled webhook endpoint."""
    now = now or utc_now()
    content = checked_content(
        tenant=tenant,
        channels=channels,
        email_to=email_to,
        webhook_endpoint_id=webhook_endpoint_id,
        rrule=rrule,
        timezone=timezone,
        recipients=recipients,
        category=category,
    )
    if project_id is not None and not _tenant_projects(tenant).filter(pk=project_id).exists():
        raise InvalidInput({"project_id": ["No project with this id exists in this tenant."]})
    if digest is not None:
        check_digest(content, fire_at=fire_at, project_id=project_id)
    with transaction.atomic(savepoint=False):
        # The product's own e-mails are not the tenant's use of its plan.
        if source == NotificationSource.API:
            charge(tenant.id, "notifications_per_month", now=now, limits=tenant_limits(tenant))
        if digest is not None:
            return digest_join(
                tenant=tenant,
                recipient_key=content["recipients"][0],
                key=digest["key"],
                window_seconds=digest["window_seconds"],
                digest_subject=digest.get("subject", ""),
                subject=subject,
                body=body,
                category=content["category"],
                now=now,
            )
        return Notification.objects.create(
            tenant=tenant,
            project_id=project_id,
            subject=subject,
            body=body,
            source=source,
            **_schedule_from(fire_at or now, content, now=now),
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
    `occurrence` is kept. A finished row (completed or dead-lettered) is not scheduled again
    (NotificationFinished); removing the rule of a recurring row that has fired, with no new
    fire_at, finishes its schedule instead of firing it once more. A change of content
    alone leaves the state as it is. Naming another webhook endpoint that is disabled raises
    EndpointDisabled (one the row named already may have been disabled since).
    """
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise TypeError(f"not updatable: {sorted(unknown)}")
    now = now or utc_now()
    notification = _own_notification(tenant=tenant, notification_id=notification_id)
    if notification.is_claimed(now=now):
        raise NotificationClaimed
    rescheduled = bool(_SCHEDULE_FIELDS & set(changes))
    if rescheduled and notification.state in _FINISHED:
        raise NotificationFinished
    merged = _merged_content(notification, changes)
    fire_at = merged.pop("fire_at", None) or notification.recurrence_anchor or now
    values: dict[str, Any] = checked_content(
        tenant=tenant,
        **merged,
        endpoint_must_be_enabled=merged["webhook_endpoint_id"] != notification.webhook_endpoint_id,
    )
    values.update({key: changes[key] for key in ("subject", "body") if key in changes})
    if rescheduled and _rule_removed_after_firing(notification, values, changes):
        values.update(next_fire_at=None, state=after(notification.state, Move.COMPLETE))
    elif rescheduled:
        values.update(
            **_schedule_from(fire_at, values, now=now),
            error_count=0,
            dead_letter_reason="",
            unfinished_claims=0,
            state=after(notification.state, Move.RESCHEDULE),
        )
    return _guarded_update(notification, values=values, now=now)


_FINISHED = (NotificationState.COMPLETED, NotificationState.DEAD_LETTERED)


def _rule_removed_after_firing(
    notification: Notification, values: Mapping[str, Any], changes: Mapping[str, Any]
) -> bool:
    """A recurring row that has fired loses its rule with no new fire_at: what is left of a
    one-shot at its old anchor is in the past and delivered already, so the schedule ends."""
    return (
        bool(notification.rrule)
        and not values["rrule"]
        and "fire_at" not in changes
        and notification.last_fired_at is not None
        and notification.state in CLAIMABLE
    )


def _merged_content(notification: Notification, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The row's checked content with `changes` over it (fire_at included, if changed)."""
    return {
        "channels": notification.channels,
        "email_to": notification.email_to,
        "webhook_endpoint_id": notification.webhook_endpoint_id,
        "rrule": notification.rrule,
        "timezone": notification.timezone,
        "recipients": notification.recipients,
        "category": notification.category,
        **{key: value for key, value in changes.items() if key not in ("subject", "body")},
    }


def _schedule_from(
    fire_at: datetime, content: Mapping[str, Any], *, now: datetime
) -> dict[str, Any]:
    """A schedule started afresh from `fire_at` (naive: wall-clock time in the content's
    zone): its anchor, and its first occurrence, due then."""
    anchor = fire_instant(fire_at, content["timezone"])
    first = first_fire_at(anchor, content, now=now)
    return {"recurrence_anchor": anchor, "next_fire_at": first, "due_at": first}


def notification_delete(*, tenant: Tenant, notification_id: UUID) -> None:
    """Delete the row. A delivery in flight finishes, but its write-back is fenced out; the
    delivery log is kept."""
    rows = Notification.objects.filter(pk=notification_id, tenant=tenant)
    # The condition is part of the delete: a message's delivery is never deleted here.
    deleted, _ = _own_rows(rows).delete()
    if not deleted:
        _own_notification(tenant=tenant, notification_id=notification_id)
        raise Notification.DoesNotExist


def notification_retry(
    *, tenant: Tenant, notification_id: UUID, now: datetime | None = None
) -> Notification:
    """Re-arm a failing row (dead-lettered, backing off or parked: the states a retry starts
    from) with its error state cleared and due now (`scheduled`). Raises NotificationHealthy,
    changing nothing, for a row in another state (scheduled, completed), and EndpointDeleted
    when its webhook still has to go and its endpoint was deleted."""
    now = now or utc_now()
    notification = _own_notification(tenant=tenant, notification_id=notification_id)
    if not allows(notification.state, Move.RETRY):
        raise NotificationHealthy(notification.state)
    _check_endpoint(notification)
    values = rearmed(next_fire_at=now, state=after(notification.state, Move.RETRY))
    return _guarded_update(notification, values=values, now=now)


def _check_endpoint(notification: Notification) -> None:
    """EndpointDeleted when the row's webhook channel has not been delivered for this
    occurrence and its endpoint is gone (deleting an endpoint leaves its rows without
    one)."""
    webhook_pending = (
        Channel.WEBHOOK in notification.channels
        and notification.channel_state.get(Channel.WEBHOOK) != DeliveryOutcome.DELIVERED
    )
    if webhook_pending and notification.webhook_endpoint_id is None:
        raise EndpointDeleted


def notification_unpark(
    *, tenant: Tenant, notification_id: UUID, now: datetime | None = None
) -> Notification:
    """Put a parked or dead-lettered row back on its schedule.

    A one-shot becomes due now; a recurring row resumes at its next occurrence after `now`
    (the parked occurrence stays in the delivery log). Raises NotificationNotParked for a
    row in another state, EndpointDeleted as notification_retry does and ScheduleFinished
    when a recurring schedule has ended.
    """
    now = now or utc_now()
    notification = _own_notification(tenant=tenant, notification_id=notification_id)
    if not allows(notification.state, Move.UNPARK):
        raise NotificationNotParked
    _check_endpoint(notification)
    state = after(notification.state, Move.UNPARK)
    if not notification.is_recurring:
        values = rearmed(next_fire_at=now, state=state)
        return _guarded_update(notification, values=values, now=now)
    try:
        resume_at = next_occurrence(
            rrule=notification.rrule,
            tz_name=notification.timezone,
            anchor=notification.recurrence_anchor or notification.created_at,
            after=now,
            budget=recurrence_budget(),
        )
    except RuleTooCostly as exc:
        raise too_costly(exc) from None
    if resume_at is None:
        raise ScheduleFinished
    values = rearmed(next_fire_at=resume_at, state=state)
    values["occurrence"] = notification.occurrence + 1
    return _guarded_update(notification, values=values, now=now)


def _own_notification(*, tenant: Tenant, notification_id: UUID) -> Notification:
    """The tenant's row, to change here; MessageDelivery for a message's delivery."""
    notification = Notification.objects.get(pk=notification_id, tenant=tenant)
    if notification.message_id is not None:
        raise MessageDelivery(
            message_id=notification.message_id, endpoint_id=notification.webhook_endpoint_id
        )
    return notification


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
