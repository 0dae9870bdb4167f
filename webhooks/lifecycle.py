"""Endpoints that retire themselves: one that failed every delivery for
ENDPOINT_DISABLE_AFTER_HOURS is disabled (`disabled_reason` "failing") by the tick's
write-back that records the failure, in the same transaction:
- its pending one-shot deliveries (scheduled or backing off, not held by a tick) are parked:
  off the schedule, so no tick claims them and none is dead-lettered against the disabled
  endpoint. A delivery held by a tick at that instant ends as its attempt says (a later
  attempt meets the disabled endpoint and is dead-lettered); recovering the endpoint brings
  those back. A recurring row keeps its schedule;
- the tenant's owners get one e-mail and the tenant's other enabled endpoints the
  `endpoint.disabled` event (an announcement, keyed by the endpoint and the start of its
  failing streak, so it is told once).

Deleting an application disables its endpoints alike (`disabled_reason`
"application_deleted"), its pending deliveries parked, without an announcement: the tenant
asked for it.

Enabling it again (PATCH) un-parks the deliveries parked for it: due now, in creation order.
"""

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.utils.timezone import now as utc_now

from dbqueue.leases import lease_free
from delivery.hooks import WriteBackOutcomes
from delivery.models import DISABLED_FAILING, Channel, Notification, WebhookEndpoint
from delivery.outbox import Announced, Announcement, announce
from delivery.states import CLAIMABLE, Move, NotificationState, after
from delivery.validation import recipient_errors
from tenancy.models import Membership, Role, Tenant
from webhooks.applications import application_locked
from webhooks.messages import messages_exhausted
from webhooks.recovery import CHUNK_SIZE, requeue

# The `disabled_reason` of an endpoint whose application was deleted.
DISABLED_APPLICATION_DELETED = "application_deleted"


def endpoints_retire(endpoints: Sequence[WebhookEndpoint], *, now: datetime) -> None:
    """Disable the endpoints as failing, park their pending deliveries and tell the tenants
    (see the module docstring). The caller holds the endpoints' rows locked."""
    endpoints_disable([endpoint.pk for endpoint in endpoints], reason=DISABLED_FAILING, now=now)
    for endpoint in endpoints:
        endpoint.enabled, endpoint.disabled_reason = False, DISABLED_FAILING
    announce([_announced(endpoint, now=now) for endpoint in endpoints], now=now)


def endpoints_disable(endpoint_ids: Sequence[UUID], *, reason: str, now: datetime) -> None:
    """Disable the endpoints for `reason` and park their pending one-shot deliveries (those
    a tick holds end as their attempt says; see the module docstring)."""
    if not endpoint_ids:
        return
    WebhookEndpoint.objects.filter(pk__in=endpoint_ids).update(
        enabled=False, disabled_reason=reason, updated_at=now
    )
    # Every claimable state parks alike; bumping the token fences out a stale claimant.
    pending = Notification.objects.filter(webhook_endpoint_id__in=endpoint_ids, rrule="")
    pending.filter(state__in=CLAIMABLE).filter(lease_free(now=now)).update(
        state=after(NotificationState.SCHEDULED, Move.PARK),
        claim_token=F("claim_token") + 1,
        updated_at=now,
    )


def application_delete(*, tenant: Tenant, key: str, now: datetime | None = None) -> None:
    """Delete the application (see the module docstring): its endpoints are disabled
    (`disabled_reason` DISABLED_APPLICATION_DELETED) and their pending deliveries parked.
    Holding its row, so an endpoint being created for it meanwhile either committed first
    (and is disabled here) or finds it deleted."""
    now = now or utc_now()
    with transaction.atomic():
        application = application_locked(tenant_id=tenant.id, key=key)
        application.deleted_at = application.updated_at = now
        application.save(update_fields=["deleted_at", "updated_at"])
        endpoints = WebhookEndpoint.objects.filter(
            tenant=tenant, application_id=application.pk, enabled=True
        )
        endpoints_disable(
            list(endpoints.values_list("pk", flat=True)),
            reason=DISABLED_APPLICATION_DELETED,
            now=now,
        )


def _announced(endpoint: WebhookEndpoint, *, now: datetime) -> Announced:
    owners = Membership.objects.filter(tenant_id=endpoint.tenant_id, role=Role.OWNER)
    # An address the API would refuse is left out: it must not fail the tick's write-back.
    addresses = [
        email
        for email in owners.values_list("user__email", flat=True)
        if email and not recipient_errors([Channel.EMAIL], [email])
    ]
    since = endpoint.failing_since or now
    data = {
        "endpoint_id": str(endpoint.pk),
        "url": _without_query(endpoint.url),
        "disabled_reason": DISABLED_FAILING,
        "failing_since": since.isoformat(),
    }
    announcement = Announcement(
        addresses=addresses,
        email_subject="A webhook endpoint was disabled",
        email_body=(
            f"The webhook endpoint {data['url']} failed every delivery since "
            f"{since:%Y-%m-%d %H:%M} UTC, so Tickwork disabled it. Its pending deliveries are "
            "kept; enable the endpoint again to send them, then recover what it missed."
        ),
        event={"type": "endpoint.disabled", "data": data},
    )
    key = f"endpoint:{endpoint.pk}:disabled:{since.isoformat()}"
    return Announced(endpoint.tenant_id, None, key, announcement)


def _without_query(url: str) -> str:
    # A query string often holds a secret: it never goes into an e-mail or an event.
    return url.split("?", 1)[0]


def endpoint_unpark(endpoint: WebhookEndpoint, *, now: datetime) -> int:
    """Put the endpoint's parked one-shot deliveries back on the schedule, due now and one
    microsecond apart in creation order; returns how many."""
    rows = (
        Notification.objects.filter(
            webhook_endpoint=endpoint, rrule="", state=NotificationState.PARKED
        )
        .filter(lease_free(now=now))
        .order_by("created_at", "id")
        .values_list("id", "claim_token")
    )
    parked = list(rows)
    unparked = 0
    for start in range(0, len(parked), CHUNK_SIZE):
        unparked += requeue(parked[start : start + CHUNK_SIZE], first=start, now=now)
    return unparked


def after_write_back(outcomes: WriteBackOutcomes, now: datetime) -> None:
    """Webhooks' `after_write_back` hook, inside the tick's write-back transaction: each
    message delivery out of attempts is published as `message.attempt.exhausted`, and each
    endpoint that has failed long enough is retired."""
    if outcomes.dead_lettered:
        messages_exhausted(outcomes.dead_lettered, now=now)
    if outcomes.retiring:
        endpoints_retire(outcomes.retiring, now=now)
