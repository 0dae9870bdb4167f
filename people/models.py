"""The people product's rows: recipients and the digests gathered for them."""

import uuid

from django.db import models
from django.utils.timezone import now as utc_now

from delivery.models import Notification
from tenancy.models import Tenant


class Recipient(models.Model):
    """A person a tenant sends to, under the tenant's own `key` for them. `preferences`:
    {"channels": {channel: bool}, "categories": {name: {channel: bool}}} (absent = on);
    `send_window`: {"days": ["MO".."SU"], "from": "HH:MM", "until": "HH:MM"} in `timezone`,
    or null for any time."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="recipients")
    key = models.CharField(max_length=255)
    email = models.CharField(max_length=254)
    name = models.CharField(max_length=200, blank=True, default="")
    timezone = models.CharField(max_length=64, default="UTC")
    send_window = models.JSONField(null=True, blank=True)
    preferences = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_recipient"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key"], name="recipient_unique_tenant_key")
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="recipient_tenant_created_idx")
        ]

    def __str__(self) -> str:
        return self.key


class Digest(models.Model):
    """The events gathered for one recipient under one key while its window is open; the
    one-shot `notification` (due when the window closes) delivers them. Joining is one
    upsert on the open row of (tenant, recipient_key, key); the tick closes the row when it
    renders the email, and the next join opens a new one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    recipient_key = models.CharField(max_length=255)
    key = models.CharField(max_length=64)
    # [{"subject", "body"}], in the order they joined (the first MAX_DIGEST_ITEMS kept).
    items = models.JSONField(default=list)
    count = models.PositiveIntegerField(default=0)
    # The subject its key was given by the latest join that named one ("": the default,
    # the count and the first events' subjects).
    subject = models.CharField(max_length=100, blank=True, default="", db_default="")
    is_open = models.BooleanField(default=True)
    closes_at = models.DateTimeField()
    notification = models.OneToOneField(
        Notification, on_delete=models.CASCADE, related_name="digest"
    )
    created_at = models.DateTimeField(default=utc_now, editable=False)
    updated_at = models.DateTimeField(default=utc_now)

    class Meta:
        # The table of the app it was first written in (notifications).
        db_table = "notifications_digest"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "recipient_key", "key"],
                condition=models.Q(is_open=True),
                name="digest_one_open_per_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.recipient_key}/{self.key} ({self.count})"
