"""The webhooks product's rows: event types, applications, the messages published to
endpoints and the portal sessions customers manage their endpoints with."""

import uuid

from django.conf import settings
from django.db import models
from django.utils.timezone import now as utc_now

from delivery.occurrences import message_webhook_id
from tenancy.models import Tenant

# The product's own event types: they exist in every tenant (webhooks.event_types seeds
# them), and a tenant can neither archive nor redefine them.
PRODUCT_EVENT_TYPES: dict[str, str] = {
    "project.created": "A project was created; it is being provisioned.",
    "project.active": "A project finished provisioning and is active.",
    "project.failed": "A project's provisioning failed for good.",
    "member.joined": "Someone joined the team.",
    "member.removed": "A member left or was removed from the team.",
    "invitation.accepted": "An invitation to the team was accepted.",
    "message.attempt.exhausted": "A message's delivery to an endpoint ran out of attempts.",
    "endpoint.disabled": "A webhook endpoint was disabled.",
}


class EventType(models.Model):
    """A kind of message a tenant publishes and its endpoints subscribe to. `product` rows
    are the product's own types (PRODUCT_EVENT_TYPES), seeded in every tenant."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="event_types")
    name = models.CharField(max_length=256)
    description = models.CharField(max_length=1000, blank=True, default="")
    archived = models.BooleanField(default=False)
    product = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_eventtype"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="event_type_unique_name"),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="event_type_tenant_idx"),
        ]

    def __str__(self) -> str:
        return self.name


class Application(models.Model):
    """One customer of the tenant: its endpoints (WebhookEndpoint.application_id) and the
    messages addressed to it reach nobody else. `uid` is the tenant's own key for the
    customer. Deleting one sets `deleted_at`, so its history stays until retention and its
    `uid` is free for a new application."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="applications")
    uid = models.CharField(max_length=256)
    name = models.CharField(max_length=256)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "uid"],
                condition=models.Q(deleted_at__isnull=True),
                name="application_unique_live_uid",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="application_tenant_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.uid})"


class Message(models.Model):
    """An event published once to every endpoint subscribed to its type among those of its
    application (none: the tenant's own endpoints); each delivery is a one-shot webhook
    Notification naming it. `dedup_key` holds `event_id` while it deduplicates (24 hours, per
    application): a later publish with the same event_id clears the old one's first, so the
    unique constraints hold the window without a lock."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="messages")
    # The customer it is addressed to; NULL: the tenant's own endpoints.
    # RESTRICT, not PROTECT: deleting a tenant takes its applications and messages together.
    application = models.ForeignKey(
        Application, on_delete=models.RESTRICT, null=True, blank=True, related_name="messages"
    )
    event_type = models.CharField(max_length=256)
    event_id = models.CharField(max_length=256, null=True, blank=True)  # noqa: DJ001
    dedup_key = models.CharField(max_length=256, null=True, blank=True, editable=False)  # noqa: DJ001
    payload = models.JSONField(default=dict)
    # The endpoints the message was first sent to, as the API answered them.
    endpoint_ids = models.JSONField(default=list, editable=False)
    created_at = models.DateTimeField(default=utc_now, editable=False)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_message"
        # NULLs are distinct in a unique constraint (on SQLite as on PostgreSQL), so one
        # constraint over (tenant, application, dedup_key) would let the tenant's own
        # messages repeat an event_id: one partial constraint for each kind of message.
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "dedup_key"],
                condition=models.Q(application__isnull=True),
                name="message_unique_tenant_dedup_key",
            ),
            models.UniqueConstraint(
                fields=["tenant", "application", "dedup_key"],
                condition=models.Q(application__isnull=False),
                name="message_unique_application_dedup_key",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="message_tenant_idx"),
            models.Index(
                fields=["tenant", "application", "-created_at"], name="message_application_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} ({self.id})"

    @property
    def webhook_id(self) -> str:
        """The webhook-id every delivery of this message carries, on every attempt."""
        return message_webhook_id(self.id)


class PortalCapability(models.TextChoices):
    """What a portal session may do beside viewing its application's endpoints, messages and
    attempts (`view`, which every session has)."""

    VIEW = "view", "View endpoints, messages and attempts"
    MANAGE_ENDPOINTS = "manage_endpoints", "Create, edit, subscribe, disable and delete endpoints"
    VIEW_SECRET = "view_secret", "Reveal endpoints' signing secrets"
    ROTATE_SECRET = "rotate_secret", "Rotate endpoints' signing secrets"
    RESEND = "resend", "Resend messages and recover endpoints"


class PortalSession(models.Model):
    """A link the tenant hands one of its customers (an application) to manage that
    application's endpoints in the portal page. Only the token's lookup prefix and digest
    are kept (tenancy.token_format, scheme `tkp_`); it stops at `expires_at`, at
    `revoked_at`, or when its application is deleted."""

    # Set on a session just made (webhooks.portal.sessions), never stored: the one time the
    # token and the link holding it are shown.
    plaintext: str
    url: str

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="portal_sessions")
    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="portal_sessions"
    )
    capabilities = models.JSONField(default=list)
    prefix = models.CharField(max_length=32, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(default=utc_now, editable=False)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="portal_session_tenant_idx"),
        ]

    def __str__(self) -> str:
        # Never the prefix: it is part of the token.
        return f"portal session {self.id}"
