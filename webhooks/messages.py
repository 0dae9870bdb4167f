"""Messages: an event published once and delivered to every endpoint subscribed to its
type among the endpoints of its application (without one: the tenant's own endpoints, those
of no application), and the history and resend of those deliveries. No message reaches
another application's endpoint: the endpoints a publish reads are its application's only.

Each delivery is an ordinary one-shot webhook notification naming its message, so run_tick
claims, leases, fences, signs, retries and dead-letters it as any other row, at a plain
row's cost: its webhook-id is the message's (`msg_<id>`, from the row's own message_id
column), the same on every attempt and every resend. The row carries the Standard Webhooks
body's `type` and `timestamp`; its `data`, the payload, is stored once, with the message, and
read for the rows a claim took in one query (`payloads_for_claimed`, the engine's
`on_claimed` hook), so publishing to 100 endpoints writes the payload once, not 100 times.

Every function looks rows up within the given tenant only, so another tenant's message or
endpoint raises `DoesNotExist` exactly like a missing one.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.timezone import now as utc_now

from dbqueue.fences import guarded_update
from dbtools.fields import max_length
from delivery.conflicts import EndpointDisabled, NotificationClaimed
from delivery.hooks import SendDecision
from delivery.models import (
    Channel,
    Delivery,
    DeliveryOutcome,
    Notification,
    NotificationSource,
    NotificationState,
    WebhookEndpoint,
)
from delivery.outbox import Event, one_shot_due, put, rearmed
from delivery.states import Move, after
from tenancy.models import Tenant
from tenancy.plans import tenant_limits
from tenancy.quotas import charge
from web.errors import Forbidden, InvalidInput
from webhooks.applications import application_filter_id, application_id_of
from webhooks.event_types import active_event_type_errors
from webhooks.models import PRODUCT_EVENT_TYPES, Message

MAX_PAYLOAD_BYTES = 256 * 1024
# How long an event_id deduplicates: a repeat within it answers the first message.
DEDUP_WINDOW = timedelta(hours=24)
SUBJECT_MAX = max_length(Notification, "subject")


class ProductEventTypeReserved(Forbidden):
    kind = "product-event-type-reserved"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name!r} is one of the product's own event types: only Tickwork publishes it."
        )


def publish_message(
    *,
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    event_id: str | None = None,
    application: str | None = None,
    now: datetime | None = None,
) -> Message:
    """Publish one message (POST /v1/messages): one queued delivery per enabled endpoint of
    the live `application` named by id or uid (None: per enabled endpoint of the tenant's
    own) subscribed to `event_type`. A repeat of `event_id` to the same application within
    DEDUP_WINDOW returns the first message and queues nothing. Raises InvalidInput for an
    unknown application, an unknown or archived event type or a payload over
    MAX_PAYLOAD_BYTES (kind `payload-too-large`);
    ProductEventTypeReserved for one of the product's own types, which only the product
    publishes, so that its receivers can trust them; QuotaExceeded over the plan's
    messages_per_month, publishing nothing."""
    if event_type in PRODUCT_EVENT_TYPES:
        raise ProductEventTypeReserved(event_type)
    if len(json.dumps(payload, separators=(",", ":")).encode()) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(
            {"payload": [f"Must be at most {MAX_PAYLOAD_BYTES} bytes of JSON."]},
            message=f"The payload exceeds {MAX_PAYLOAD_BYTES} bytes of JSON.",
            kind="payload-too-large",
        )
    errors = active_event_type_errors(tenant_id=tenant.id, names=[event_type])
    if errors:
        raise InvalidInput({"event_type": errors})
    item = Event(
        tenant_id=tenant.id,
        event_type=event_type,
        payload=payload,
        event_id=event_id,
        application_id=application_id_of(tenant_id=tenant.id, key=application, field="application"),
    )
    now = now or utc_now()
    with transaction.atomic():
        message = messages_publish([item], now=now)[0]
        # A repeat of an event_id answers the first message, made before now: it is not a
        # new use of the plan. Over the quota, QuotaExceeded undoes the publish.
        if message.created_at == now:
            charge(tenant.id, "messages_per_month", now=now, limits=tenant_limits(tenant))
    return message


def messages_publish(
    items: Sequence[Event],
    *,
    now: datetime | None = None,
    alongside: Sequence[Notification] = (),
) -> list[Message]:
    """Publish `items` (their event types already checked), one message each, returned in
    order (a deduplicated item gives the first message). Whatever the number of items and
    endpoints: one read of the endpoints, one insert of the messages, one of the
    deliveries (and, with event ids, two reads and at most one update for the dedup).
    `alongside` are other notifications (a producer's e-mails) inserted with the
    deliveries, any whose source key exists already skipped."""
    now = now or utc_now()
    # Part of the caller's transaction when there is one: nothing here is retried alone.
    with transaction.atomic(savepoint=False):
        firsts = _first_messages(items, now=now)
        subscribed = _subscribed_endpoints(items)
        fresh: dict[int, Message] = {}
        for index, item in enumerate(items):
            if _key(item) in firsts:
                continue
            endpoint_ids = [
                endpoint.id
                for endpoint in subscribed.get(_group(item), [])
                if endpoint.receives(item)
            ]
            fresh[index] = Message(
                tenant_id=item.tenant_id,
                application_id=item.application_id,
                event_type=item.event_type,
                event_id=item.event_id,
                dedup_key=item.event_id,
                payload=item.payload,
                endpoint_ids=[str(endpoint_id) for endpoint_id in endpoint_ids],
                created_at=now,
            )
        landed = _insert_messages(list(fresh.values()))
        firsts.update(_first_messages(items, now=now) if len(landed) < len(fresh) else {})
        rows = [
            _delivery_row(message, items[index], endpoint_id=UUID(endpoint_id), now=now)
            for index, message in fresh.items()
            if message.id in landed
            for endpoint_id in message.endpoint_ids
        ]
        if alongside:
            put([*alongside, *rows], skip_existing=True)
        else:
            put(rows)
    return [
        fresh[index] if index in fresh and fresh[index].id in landed else firsts[_key(item)]
        for index, item in enumerate(items)
    ]


def product_event_publish(
    *,
    tenant_id: UUID,
    event_type: str,
    data: dict[str, Any],
    event_id: str | None = None,
    project_id: UUID | None = None,
    now: datetime | None = None,
) -> Message:
    """Publish one of the product's own events (PRODUCT_EVENT_TYPES) to the tenant's own
    subscribed endpoints (never an application's: they are the tenant's news), through the
    same path as a tenant's messages."""
    item = Event(
        tenant_id=tenant_id,
        event_type=event_type,
        payload=data,
        event_id=event_id,
        project_id=project_id,
        source=NotificationSource.SYSTEM,
    )
    return messages_publish([item], now=now)[0]


EXHAUSTED = "message.attempt.exhausted"
# The product's events about its own deliveries: they reach only endpoints that name them.
OPERATIONAL_EVENT_TYPES = frozenset({EXHAUSTED, "endpoint.disabled"})


def messages_exhausted(notification_ids: Sequence[Any], *, now: datetime) -> None:
    """Publish `message.attempt.exhausted` for each message delivery among the rows just
    dead-lettered, to the tenant's own endpoints subscribed to it (in the write-back's
    transaction). A delivery of that event itself publishes nothing, so an endpoint that
    fails it cannot feed it back; the event id (the message and the hour) tells it at most
    once an hour per message, and only to endpoints that name the type and are not failing
    (`_Subscriber.receives`)."""
    exhausted = (
        Notification.objects.filter(pk__in=notification_ids, message__isnull=False)
        .exclude(message__event_type=EXHAUSTED)
        .values_list("tenant_id", "message_id", "message__event_type", "webhook_endpoint_id")
    )
    items = [
        Event(
            tenant_id=tenant_id,
            event_type=EXHAUSTED,
            payload={
                "message_id": str(message_id),
                "event_type": event_type,
                "endpoint_id": str(endpoint_id),
            },
            # One per message an hour, whichever of its endpoints ran out.
            event_id=f"exhausted:{message_id}:{now:%Y-%m-%dT%H}",
            source=NotificationSource.SYSTEM,
        )
        for tenant_id, message_id, event_type, endpoint_id in exhausted
    ]
    if items:
        messages_publish(items, now=now)


def message_rows(item: Event, *, now: datetime | None = None) -> list[Any]:
    """`item`'s message and its deliveries as unsaved rows, the message first, for a
    producer that inserts them with its own rows in one statement (a project's create).
    `item` carries no event_id: the producer's own insert is what happens once."""
    now = now or utc_now()
    endpoint_ids = [
        endpoint.id
        for endpoint in _subscribed_endpoints([item]).get(_group(item), [])
        if endpoint.receives(item)
    ]
    message = Message(
        tenant_id=item.tenant_id,
        application_id=item.application_id,
        event_type=item.event_type,
        payload=item.payload,
        endpoint_ids=[str(endpoint_id) for endpoint_id in endpoint_ids],
        created_at=now,
    )
    deliveries = [
        _delivery_row(message, item, endpoint_id=endpoint_id, now=now)
        for endpoint_id in endpoint_ids
    ]
    return [message, *deliveries]


# The endpoints an event goes to: (tenant, application), the application None for the
# tenant's own endpoints.
_Group = tuple[UUID, UUID | None]
# What an event_id deduplicates within: its group.
_Key = tuple[UUID, UUID | None, str | None]


def _group(item: Event) -> _Group:
    return (item.tenant_id, item.application_id)


def _key(item: Event) -> _Key:
    return (item.tenant_id, item.application_id, item.event_id)


def _first_messages(items: Sequence[Event], *, now: datetime) -> dict[_Key, Message]:
    """The messages still deduplicating the items' event ids, each within its application;
    an expired one stops deduplicating (its key is cleared) so the new message can take it."""
    keyed = [item for item in items if item.event_id is not None]
    if not keyed:
        return {}
    found = Message.objects.filter(
        tenant_id__in={item.tenant_id for item in keyed},
        dedup_key__in={item.event_id for item in keyed},
    )
    wanted = {_key(item) for item in keyed}
    live: dict[_Key, Message] = {}
    expired = []
    for message in found:
        key = (message.tenant_id, message.application_id, message.dedup_key)
        if key not in wanted:
            continue
        if message.created_at > now - DEDUP_WINDOW:
            live[key] = message
        else:
            expired.append(message.id)
    if expired:
        Message.objects.filter(id__in=expired).update(dedup_key=None)
    return live


def _insert_messages(messages: list[Message]) -> set[UUID]:
    """Insert `messages` in one statement; returns the ids that landed (a message whose
    event id another publish took meanwhile does not)."""
    if not messages:
        return set()
    Message.objects.bulk_create(messages, ignore_conflicts=True)
    if all(message.dedup_key is None for message in messages):
        return {message.id for message in messages}
    ids = [message.id for message in messages]
    return set(Message.objects.filter(id__in=ids).values_list("id", flat=True))


class _Subscriber(NamedTuple):
    """An enabled endpoint as a publish weighs it."""

    id: UUID
    event_types: list[str] | None
    # Its last delivery failed (a 4xx included), or its circuit is open.
    failing: bool

    def receives(self, item: Event) -> bool:
        """Whether `item` goes to this endpoint. The product's operational events go only to
        an endpoint that names them (never through "every type"), never to the endpoint they
        are about, and never to one that is failing itself: a failing message must not
        multiply into a delivery per endpoint per endpoint."""
        if item.event_type not in OPERATIONAL_EVENT_TYPES:
            return self.event_types is None or item.event_type in self.event_types
        return (
            self.event_types is not None
            and item.event_type in self.event_types
            and not self.failing
            and str(self.id) != item.payload.get("endpoint_id")
        )


def _subscribed_endpoints(items: Sequence[Event]) -> dict[_Group, list[_Subscriber]]:
    """The enabled endpoints of the items' groups (each tenant's own, or an application's)
    with their subscriptions, oldest first: one read, of those groups' endpoints only."""
    own = {item.tenant_id for item in items if item.application_id is None}
    addressed = {_group(item) for item in items if item.application_id is not None}
    groups = Q(tenant_id__in=own, application_id__isnull=True) if own else Q()
    if addressed:
        tenants = {tenant_id for tenant_id, _ in addressed}
        applications = {application_id for _, application_id in addressed}
        groups |= Q(tenant_id__in=tenants, application_id__in=applications)
    endpoints: dict[_Group, list[_Subscriber]] = {}
    enabled = WebhookEndpoint.objects.filter(groups, enabled=True).order_by("created_at", "id")
    rows = enabled.values_list(
        "tenant_id",
        "application_id",
        "id",
        "event_types",
        "consecutive_failures",
        "failed_deliveries",
    )
    for tenant_id, application_id, endpoint_id, types, failures, failed in rows:
        subscriber = _Subscriber(endpoint_id, types, failing=bool(failures or failed))
        endpoints.setdefault((tenant_id, application_id), []).append(subscriber)
    return endpoints


def _delivery_row(
    message: Message, item: Event, *, endpoint_id: UUID, now: datetime
) -> Notification:
    """A one-shot webhook notification delivering `message` to one endpoint, due now."""
    return one_shot_due(
        now,
        tenant_id=message.tenant_id,
        project_id=item.project_id,
        channels=[Channel.WEBHOOK],
        webhook_endpoint_id=endpoint_id,
        webhook_event=_event(message),
        subject=message.event_type[:SUBJECT_MAX],
        message_id=message.id,
        source=item.source,
    )


def _event(message: Message) -> dict[str, Any]:
    # The timestamp is the message's, so a retry and a resend send the same body. No
    # "data": the payload is the message's, loaded when the row is sent.
    return {
        "type": message.event_type,
        "timestamp": message.created_at.isoformat().replace("+00:00", "Z"),
    }


def payloads_for_claimed(rows: Sequence[Notification], now: datetime) -> dict[Any, SendDecision]:
    """The payload of the message each claimed delivery sends, as its webhook data: one
    read of the messages for the whole claim (none when no row needs one). A row written
    when deliveries held the payload themselves needs nothing."""
    wanting = [
        row
        for row in rows
        if row.message_id is not None and "data" not in (row.webhook_event or {})
    ]
    if not wanting:
        return {}
    payloads = dict(
        Message.objects.filter(pk__in={row.message_id for row in wanting}).values_list(
            "id", "payload"
        )
    )
    return {
        row.pk: SendDecision(webhook_data=payloads[row.message_id])
        for row in wanting
        if row.message_id in payloads
    }


def message_pages(
    *,
    tenant: Tenant,
    event_type: str | None = None,
    since: datetime | None = None,
    application: str | None = None,
) -> QuerySet[Message]:
    """The tenant's messages (of `event_type`, created at or after `since`, to the
    application named by id or uid — a deleted one by its id —, if given)."""
    messages = Message.objects.filter(tenant=tenant)
    if application is not None:
        application_id = application_filter_id(tenant_id=tenant.id, key=application)
        if application_id is None:
            return messages.none()
        messages = messages.filter(application_id=application_id)
    if event_type is not None:
        messages = messages.filter(event_type=event_type)
    if since is not None:
        messages = messages.filter(created_at__gte=since)
    return messages


RESEND_DISABLED = (
    "The webhook endpoint is disabled, so a resend to it would only be parked. Enable it "
    "first (PATCH disabled: false), then resend."
)


def message_resend(
    *, tenant: Tenant, message_id: UUID, endpoint_id: UUID, now: datetime | None = None
) -> Notification:
    """Send the message to the endpoint again, due now, with the same webhook-id and body,
    never as a second chain of attempts: the latest delivery to the endpoint, if it is still
    on its way (scheduled or backing off) or was given up (dead-lettered or parked), is
    brought forward (due now, its attempts reset); one that was delivered (or none left) is
    queued again as a new delivery. Resends of one message take turns on the message's
    row, so two at once bring one delivery forward twice rather than queue two.

    Either way it counts as one message of the plan: bringing a delivery forward starts its
    attempts afresh, as many sends as a new delivery may make, so a free one would let a
    client reset a failing delivery's attempts without limit. QuotaExceeded over the quota,
    nothing changed. NotificationClaimed while run_tick holds the delivery (its write-back
    decides where it goes; resend again after). EndpointDisabled for a disabled endpoint.
    DoesNotExist when the message or the endpoint is not the tenant's, or the message never
    targeted that endpoint."""
    now = now or utc_now()
    with transaction.atomic():
        message = Message.objects.select_for_update(no_key=True).get(pk=message_id, tenant=tenant)
        endpoint = WebhookEndpoint.objects.only("pk", "enabled", "application_id").get(
            pk=endpoint_id, tenant=tenant
        )
        if endpoint.application_id != message.application_id:
            # Never to another application's endpoint (nor an application's message to the
            # tenant's own endpoint, or the other way round).
            raise WebhookEndpoint.DoesNotExist
        # Read under the message's lock: a resend that committed first is seen here.
        latest = (
            Notification.objects.filter(
                tenant=tenant, message=message, webhook_endpoint_id=endpoint_id
            )
            .order_by("-created_at", "-id")
            .first()
        )
        if latest is None and str(endpoint_id) not in message.endpoint_ids:
            raise WebhookEndpoint.DoesNotExist
        if not endpoint.enabled:
            raise EndpointDisabled(RESEND_DISABLED)
        if latest is None or latest.state == NotificationState.COMPLETED:
            item = Event(
                tenant_id=tenant.id,
                event_type=message.event_type,
                payload=message.payload,
                application_id=message.application_id,
            )
            row = _delivery_row(message, item, endpoint_id=endpoint_id, now=now)
            row.save(force_insert=True)
        else:
            row = _brought_forward(latest, now=now)
        # Over the quota, QuotaExceeded undoes the resend.
        charge(tenant.id, "messages_per_month", now=now, limits=tenant_limits(tenant))
    return row


def _brought_forward(row: Notification, *, now: datetime) -> Notification:
    """`row` due now with its attempts reset, written only if no claim is running or was
    taken since it was read (NotificationClaimed), as every change outside a claim is."""
    if row.is_claimed(now=now):
        raise NotificationClaimed
    # Its one occurrence starts afresh, as a rescheduled row's does.
    values = {
        **rearmed(next_fire_at=now, state=after(row.state, Move.RESCHEDULE)),
        "updated_at": now,
    }
    rows = Notification.objects.filter(pk=row.pk, tenant_id=row.tenant_id)
    if not guarded_update(rows, token=row.claim_token, now=now, **values):
        raise NotificationClaimed
    for field, value in values.items():
        setattr(row, field, value)
    row.claim_token += 1
    return row


# A delivery row's state as a message's history shows it.
_STATUS: dict[str, str] = {
    NotificationState.SCHEDULED: "pending",
    NotificationState.BACKING_OFF: "pending",
    NotificationState.COMPLETED: "delivered",
    NotificationState.DEAD_LETTERED: "failed",
    NotificationState.PARKED: "parked",
}
# The log's outcomes that are attempts: a request went to the endpoint and this is how it
# ended. A deferral (an open circuit, a rate limit, a receiver's Retry-After within the
# deferral horizon) counts against no attempt, and a dead-letter row is the verdict on the
# attempts before it; neither is one.
ATTEMPT_OUTCOMES = (DeliveryOutcome.DELIVERED, DeliveryOutcome.FAILED, DeliveryOutcome.TIMEOUT)


def message_attempt_pages(*, tenant: Tenant, message_id: UUID) -> QuerySet[Delivery]:
    """The message's attempts, one delivery-log row each, to every endpoint and over every
    resend. Message.DoesNotExist unless the message is the tenant's."""
    if not Message.objects.filter(pk=message_id, tenant=tenant).exists():
        raise Message.DoesNotExist
    return Delivery.objects.of_message(tenant_id=tenant.id, message_id=message_id).filter(
        outcome__in=ATTEMPT_OUTCOMES
    )


@dataclass
class EndpointDeliveries:
    """A message's delivery to one endpoint: its delivery row and status (those of its
    latest queueing), the attempts made over every queueing and the last log row's outcome."""

    endpoint_id: UUID
    notification_id: UUID
    status: str
    attempts: int = 0
    last_outcome: str | None = None
    last_http_status: int | None = None
    last_attempted_at: datetime | None = None
    next_attempt_at: datetime | None = None


def message_endpoint_pages(*, tenant: Tenant, message_id: UUID) -> QuerySet[WebhookEndpoint]:
    """The endpoints the message has a delivery to (an endpoint since deleted has none left
    to show). Message.DoesNotExist unless the message is the tenant's."""
    if not Message.objects.filter(pk=message_id, tenant=tenant).exists():
        raise Message.DoesNotExist
    deliveries = Notification.objects.filter(tenant=tenant, message_id=message_id)
    return WebhookEndpoint.objects.filter(
        tenant=tenant, id__in=deliveries.values("webhook_endpoint_id")
    ).only("id", "created_at")


def message_endpoint_deliveries(
    *, tenant: Tenant, message_id: UUID, endpoint_ids: Sequence[UUID] | None = None
) -> list[EndpointDeliveries]:
    """The message's deliveries to `endpoint_ids`, in that order (default: to every endpoint
    it has one to, in the order they were queued). Resends to an endpoint count into its
    entry; an endpoint the message never reached, or since deleted, is left out. Two reads,
    whatever the endpoints and attempts."""
    rows = Notification.objects.filter(
        tenant=tenant, message_id=message_id, webhook_endpoint_id__isnull=False
    ).order_by("created_at", "id")
    if endpoint_ids is not None:
        rows = rows.filter(webhook_endpoint_id__in=list(endpoint_ids))
    by_endpoint: dict[UUID, EndpointDeliveries] = {}
    notification_endpoints: dict[UUID, UUID] = {}
    for row in rows.values("id", "webhook_endpoint_id", "state", "next_fire_at"):
        endpoint_id = row["webhook_endpoint_id"]
        notification_endpoints[row["id"]] = endpoint_id
        entry = by_endpoint.setdefault(
            endpoint_id, EndpointDeliveries(endpoint_id, row["id"], "pending")
        )
        entry.notification_id = row["id"]
        entry.status = _STATUS.get(row["state"], "pending")
        entry.next_attempt_at = row["next_fire_at"] if entry.status == "pending" else None
    log = Delivery.objects.filter(tenant=tenant, notification_id__in=list(notification_endpoints))
    for delivery in log.order_by("attempted_at", "id"):
        entry = by_endpoint[notification_endpoints[delivery.notification_id]]
        if delivery.outcome in ATTEMPT_OUTCOMES:
            entry.attempts += 1
        if delivery.outcome != DeliveryOutcome.SKIPPED:
            entry.last_outcome = delivery.outcome
            entry.last_http_status = delivery.http_status
            entry.last_attempted_at = delivery.attempted_at
    if endpoint_ids is None:
        return list(by_endpoint.values())
    return [by_endpoint[endpoint_id] for endpoint_id in endpoint_ids if endpoint_id in by_endpoint]


class MessagePublisher:
    """Events published as messages to the tenant's subscribed endpoints: the webhooks
    product's publisher (delivery.outbox), registered at start-up."""

    def publish(
        self, events: Sequence[Event], *, now: datetime, alongside: Sequence[Notification]
    ) -> list[Message]:
        return messages_publish(events, now=now, alongside=alongside)

    def rows(self, event: Event, *, now: datetime) -> list[Any]:
        return message_rows(event, now=now)
