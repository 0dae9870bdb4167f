"""The engine's rows: the queued send (Notification), the webhook endpoints it sends to, the
Resend batches it records and the delivery log."""

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.utils.timezone import now as utc_now

from dbqueue.leases import is_lease_running
from delivery.circuits import is_circuit_open
from delivery.querysets import DeliveryQuerySet, NotificationQuerySet
from delivery.states import CLAIMABLE, DeadLetterReason, NotificationState
from tenancy.models import Tenant
from web.sealed import SealedCharField, SealedSecretsField

if TYPE_CHECKING:
    from delivery.copies import EmailCopy


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    WEBHOOK = "webhook", "Webhook"


class NotificationSource(models.TextChoices):
    """Who made a notification: a client through the API, or the product itself (its
    announcements, such as a project's activation, and its account e-mails)."""

    API = "api", "API"
    SYSTEM = "system", "System"


class EndpointHealth(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    FAILING = "failing", "Failing"
    OPEN = "open", "Circuit open"


RATE_LIMIT_MAX = 1000

# The `disabled_reason` of an endpoint the tick retired: it failed every delivery for
# ENDPOINT_DISABLE_AFTER_HOURS.
DISABLED_FAILING = "failing"


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_endpoints")
    # The product's grouping of the tenant's endpoints (the webhooks product's application,
    # one per customer of the tenant); NULL: the tenant's own endpoint. Opaque to the engine,
    # which never routes by it, so it is a plain column rather than a key into a product.
    application_id = models.UUIDField(null=True, blank=True, editable=False)
    url = models.URLField("URL", max_length=2000)
    # What the endpoint is for, in its owner's words (the portal shows it beside the URL).
    # A database default too: processes of the release before write endpoints without it.
    description = models.CharField(max_length=500, blank=True, default="", db_default="")
    # Stored sealed (web.sealed): every delivery signs with it, so it cannot be a digest.
    secret = SealedCharField(max_length=255, editable=False)
    # Secrets replaced by a rotation that still sign until their grace ends, newest first:
    # [{"secret": "whsec_…", "until": ISO 8601}] (webhook_endpoints keeps it pruned).
    retired_secrets = SealedSecretsField(default=list, blank=True, editable=False)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    # The circuit breaker, shared by every tick (delivery.circuits decides its moves).
    consecutive_failures = models.PositiveIntegerField(default=0)
    circuit_open_until = models.DateTimeField(null=True, blank=True)
    circuit_interval_seconds = models.PositiveIntegerField(default=0)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    # Failed deliveries since the last success, whatever failed them (a 4xx included).
    failed_deliveries = models.PositiveIntegerField(default=0)
    # The event type names this endpoint receives messages of; NULL receives every type.
    event_types = models.JSONField(null=True, blank=True, default=None)
    # When the first of them ended: failing for ENDPOINT_DISABLE_AFTER_HOURS retires it.
    failing_since = models.DateTimeField(null=True, blank=True)
    # Deliveries per second across every tick process (a pacing budget); NULL: no limit.
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_webhookendpoint"
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="endpoint_tenant_created_idx"),
            models.Index(
                fields=["tenant", "application_id", "-created_at"],
                name="endpoint_application_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.url

    def subscribes_to(self, event_type: str) -> bool:
        return self.event_types is None or event_type in self.event_types

    def health(self, *, now: datetime) -> str:
        """open (deliveries deferred), failing (every delivery since the last success
        failed, a 4xx answer included) or healthy."""
        if is_circuit_open(self.circuit_open_until, now=now):
            return EndpointHealth.OPEN
        if self.consecutive_failures or self.failed_deliveries:
            return EndpointHealth.FAILING
        return EndpointHealth.HEALTHY

    def signing_secrets(self, *, now: datetime) -> list[str]:
        """The secrets that sign a delivery now: the current one, then every retired one
        whose rotation grace has not ended, newest first."""
        return [self.secret, *(entry["secret"] for entry in self.secrets_in_grace(now=now))]

    def secrets_in_grace(self, *, now: datetime) -> list[dict[str, str]]:
        """The retired secrets whose grace has not ended at `now`, newest first."""
        return [
            entry for entry in self.retired_secrets if datetime.fromisoformat(entry["until"]) > now
        ]


def slot_scope(endpoint_id: Any) -> str:
    """The endpoint's scope among the concurrency slots (`dbqueue.slots`)."""
    return f"webhook:{endpoint_id}"


def default_max_attempts() -> int:
    """A new row's own attempt limit: MAX_ATTEMPTS as it is when the row is created, so a
    later change of the setting never reclassifies existing rows."""
    return settings.NOTIFICATION_MAX_ATTEMPTS


class EmailBatch(models.Model):
    """One Resend batch request as it was composed, recorded before it is sent: a retry of
    the batch sends these exact bytes under this key (Resend replays its first answer
    instead of sending again), and an email that must go again in another batch gets that
    batch's key, which cannot collide. `members` names the occurrence and the recipient's
    copy of each email, in the body's order ("<notification id>/<occurrence>/<key>")."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    body = models.TextField()
    members = models.JSONField(default=list)
    created_at = models.DateTimeField(default=utc_now, editable=False)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_emailbatch"
        indexes = [models.Index(fields=["created_at"], name="email_batch_created_idx")]

    def __str__(self) -> str:
        return f"email batch {self.id} ({len(self.members)} emails)"

    @property
    def idempotency_key(self) -> str:
        return f"batch_{self.id}"


class Notification(models.Model):
    """A one-shot (empty `rrule`) or recurring notification; the row is its own queue entry.

    `state` is stored and moved only as delivery.states allows, by the statement that
    moves the row; `next_fire_at` is NULL once it is dead-lettered or completed.
    `max_attempts` is the row's own limit, fixed at its creation.
    `due_at` is the due instant of the current occurrence (the webhook event's timestamp);
    `next_fire_at` is when its next attempt is scheduled, and lateness is measured from it.
    `claimed_until` / `claim_token` are the lease and the fence of run_tick; every write-back
    is conditional on the token the claim returned. `unfinished_claims` counts claims that
    produced no outcome, so a row that kills its worker every time is dead-lettered.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="notifications")
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notifications",
    )
    channels = models.JSONField(default=list)
    email_to = models.JSONField(default=list, blank=True)
    # The tenant's recipient keys (Recipient.key) the email goes to instead of `email_to`:
    # their addresses, preferences and send windows are read at send time.
    # Rows written in SQL (bulk loads, the planner tests) name none, with no category and
    # no digest: hence the database defaults of these three.
    recipients = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField())
    )
    # What the notification is about, for recipients' preferences (CRITICAL_CATEGORIES
    # ignore opt-outs) and their one-click unsubscribe; "" for none.
    category = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The key of the digest this row delivers ("" for none): its body is rendered from the
    # digest's items when it is sent (people.digests).
    digest_key = models.CharField(
        max_length=64, blank=True, default="", db_default="", editable=False
    )
    subject = models.CharField(max_length=200, blank=True, default="")
    body = models.TextField(blank=True, default="")
    webhook_endpoint = models.ForeignKey(
        WebhookEndpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notifications",
    )
    # Channels of the current occurrence already finished ({channel: "delivered"|"failed"}):
    # a channel that was deferred goes later alone, and a finished one is never sent again.
    channel_state = models.JSONField(default=dict, blank=True)
    # A custom webhook event ({"type", "data"}); empty means the standard
    # notification.fired. A message's delivery holds {"type", "timestamp"} only: its data is
    # the message's payload, stored once with the message and read when the row is sent
    # (`webhook_data`). Rows written before that hold the payload in "data" themselves.
    webhook_event = models.JSONField(null=True, blank=True)
    # The message this row delivers to its endpoint: the message's id is its webhook-id.
    message = models.ForeignKey(
        "webhooks.Message",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_index=False,
    )
    rrule = models.CharField(max_length=500, blank=True, default="")
    timezone = models.CharField(max_length=64, default="UTC")
    recurrence_anchor = models.DateTimeField(null=True, blank=True)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    # When the current occurrence was first due. A backoff or a deferral moves next_fire_at
    # but not this, so every attempt of the occurrence carries the same event timestamp.
    due_at = models.DateTimeField(null=True, blank=True)
    occurrence = models.PositiveIntegerField(default=1)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    error_count = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=default_max_attempts, editable=False)
    state = models.CharField(
        max_length=16,
        choices=NotificationState.choices,
        default=NotificationState.SCHEDULED,
        editable=False,
    )
    # NULL after a clean success, as the API reports it.
    last_error = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    dead_letter_reason = models.CharField(
        max_length=16,
        choices=DeadLetterReason.choices,
        blank=True,
        default="",
    )
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.BigIntegerField(default=0)
    unfinished_claims = models.PositiveIntegerField(default=0)
    # The recorded Resend batch carrying this occurrence's email until its outcome is known:
    # a retry resends that identical batch. Cleared when the occurrence ends.
    email_batch = models.ForeignKey(
        EmailBatch,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    # Set by internal producers (e.g. a job's invitations) so re-running them creates nothing.
    source_key = models.CharField(max_length=200, null=True, blank=True, editable=False)  # noqa: DJ001
    source = models.CharField(
        max_length=8,
        choices=NotificationSource.choices,
        default=NotificationSource.API,
        # Rows written in SQL (bulk loads, the planner tests) are the API's too.
        db_default=NotificationSource.API,
        editable=False,
    )
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)

    objects = NotificationQuerySet.as_manager()

    # Set by the tick for the attempt at hand (delivery.hooks), never stored: the email's
    # copies as a product decided them (delivery.copies; None: one per `email_to`
    # address), the channels and copies the recipients' preferences suppress, each with
    # why, and the payload of the message the row delivers.
    email_copies: "Sequence[EmailCopy] | None" = None
    suppressed_channels: Mapping[str, str] = MappingProxyType({})
    webhook_data: Mapping[str, Any] | None = None

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_notification"
        indexes = [
            # Serves the due query: rows off their schedule (dead-lettered, parked,
            # completed) are not in it, future rows are past the range scan's end, so its
            # cost grows with neither. Claimed rows stay in it (a claim moves no state).
            models.Index(
                fields=["next_fire_at"],
                condition=models.Q(state__in=list(CLAIMABLE)),
                name="notification_due_idx",
            ),
            # For the prune only; partial, so only a completion writes to it.
            models.Index(
                fields=["last_fired_at"],
                condition=models.Q(state=NotificationState.COMPLETED),
                name="notification_completed_idx",
            ),
            # PostgreSQL's claim walks it (ClaimSpec.groups): from one tenant with rows on
            # their schedule to the next, taking each one's first due rows in claim order.
            # Made on PostgreSQL only (migration 0008): SQLite's planner would scan it whole.
            models.Index(
                fields=["tenant", "next_fire_at", "id"],
                condition=models.Q(state__in=list(CLAIMABLE)),
                name="notification_tenant_due_idx",
            ),
            models.Index(fields=["tenant", "-created_at"], name="notification_tenant_idx"),
            # A message's deliveries; partial, so plain notifications never write to it.
            models.Index(
                fields=["message"],
                condition=models.Q(message__isnull=False),
                name="notification_message_idx",
            ),
            # An endpoint's recovery walks its given-up rows in creation order. Partial: only
            # a row entering or leaving those states writes to it, and a row the recovery has
            # re-queued is out of it, so each chunk starts where the last one ended.
            models.Index(
                fields=["webhook_endpoint", "created_at", "id"],
                condition=models.Q(
                    state__in=[NotificationState.DEAD_LETTERED, NotificationState.PARKED]
                ),
                name="notification_recover_idx",
            ),
            # Pruning a batch clears the rows still naming it (none, unless parked).
            models.Index(
                fields=["email_batch"],
                condition=models.Q(email_batch__isnull=False),
                name="notification_email_batch_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "source_key"], name="notification_unique_tenant_source_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject or 'notification'} ({self.id})"

    @property
    def is_recurring(self) -> bool:
        return bool(self.rrule)

    def is_claimed(self, *, now: datetime) -> bool:
        return is_lease_running(self.claimed_until, now=now)


class DeliveryOutcome(models.TextChoices):
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"
    TIMEOUT = "timeout", "Timeout"
    DEFERRED = "deferred", "Deferred (not attempted)"
    SKIPPED = "skipped", "Skipped"
    DEAD_LETTERED = "dead_lettered", "Dead-lettered"
    # Not sent, by the recipient's choice (their preferences): neither delivered nor failed.
    SUPPRESSED = "suppressed", "Suppressed"


# The channel of a log row that is about the occurrence, not one channel's attempt.
WHOLE_OCCURRENCE = ""


class Delivery(models.Model):
    """One channel attempt of one occurrence. Not a foreign key to the notification on
    purpose: the log outlives deleted notifications.

    `late_ms` is attempted_at minus the time this attempt was scheduled for (the
    occurrence's due time, the end of its backoff or of its deferral; never negative), on
    channel attempts only. A `skipped` row (channel "") records the occurrences a late recurring
    row jumped over: how many, the first and the last of them. A `suppressed` row is a channel
    a product's decision kept from sending (a recipient's preference), its reason in
    `error_category` and `error`.

    `recipient` names the copy of an email a row is about (each recipient's copy goes,
    waits and fails on its own). `endpoint_id` is the webhook endpoint of a webhook
    attempt (and of an occurrence-wide row of a notification with one), kept, like the
    notification's id, without a foreign key. `attempt` is the attempt of the occurrence
    (1 for the first; NULL on rows logged before it was recorded); `created_at` when the
    row was written."""

    notification_id = models.UUIDField()
    endpoint_id = models.UUIDField(null=True, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    # No index of its own: both composite indexes below start with the tenant, and every
    # index costs each insert on the hottest write path of run_tick.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    occurrence = models.PositiveIntegerField()
    channel = models.CharField(max_length=16)
    # The recipient of an email copy: their key, or the address of a plain `email_to`
    # address; "" for a whole channel or occurrence.
    recipient = models.CharField(max_length=255, blank=True, default="", db_default="")
    outcome = models.CharField(max_length=16, choices=DeliveryOutcome.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_category = models.CharField(max_length=32, blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    attempted_at = models.DateTimeField(default=utc_now)
    late_ms = models.PositiveBigIntegerField(null=True, blank=True)
    skipped_count = models.PositiveIntegerField(default=0)
    skipped_first = models.DateTimeField(null=True, blank=True)
    skipped_last = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=utc_now)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_delivery"
        indexes = [
            models.Index(
                fields=["tenant", "notification_id", "-attempted_at"],
                name="delivery_notification_idx",
            ),
            models.Index(fields=["tenant", "-attempted_at"], name="delivery_tenant_idx"),
            models.Index(fields=["attempted_at"], name="delivery_attempted_idx"),
        ]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.notification_id}#{self.occurrence} {self.channel}: {self.outcome}"
