"""Recipients and their digests in the admin, read-only: a recipient's profile, preferences
and send window are written through the API, which checks them (recipients.recipient_put);
a digest is the tick's and its notification's. Unsubscribe tokens are never stored, so no
page can show one."""

from collections.abc import Mapping
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import display_for_value
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from people.models import Digest, Recipient
from web.admin import ReadOnlyModelAdmin, pretty_json


def preferences_summary(preferences: Mapping[str, Any]) -> str:
    """What a recipient turned off, in one line ("" when nothing): the channels, then each
    category's channels."""
    off = [channel for channel, on in preferences.get("channels", {}).items() if not on]
    for category, channels in sorted(preferences.get("categories", {}).items()):
        muted = [channel for channel, on in channels.items() if not on]
        if muted:
            off.append(f"{category}: {', '.join(muted)}")
    return "; ".join(off)


class SendWindowFilter(admin.SimpleListFilter):
    title = "send window"
    parameter_name = "send_window"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("any", "Any time"), ("window", "Within a window")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "any":
            return queryset.filter(send_window__isnull=True)
        if self.value() == "window":
            return queryset.filter(send_window__isnull=False)
        return queryset


@admin.register(Recipient)
class RecipientAdmin(ReadOnlyModelAdmin):
    list_display = ["key", "name", "email", "tenant", "timezone", "turned_off", "created_at"]
    list_filter = [SendWindowFilter]
    list_select_related = ["tenant"]
    search_fields = ["key", "email", "name", "tenant__name"]
    ordering = ["-created_at"]
    fields = readonly_fields = (
        "tenant",
        "key",
        "name",
        "email",
        "timezone",
        "window",
        "turned_off",
        "preferences_json",
        "open_digests",
        "created_at",
        "updated_at",
    )

    @admin.display(description="turned off")
    def turned_off(self, recipient: Recipient) -> str:
        return preferences_summary(recipient.preferences) or "-"

    @admin.display(description="preferences")
    def preferences_json(self, recipient: Recipient) -> str:
        return pretty_json(recipient.preferences)

    @admin.display(description="send window")
    def window(self, recipient: Recipient) -> str:
        return pretty_json(recipient.send_window) if recipient.send_window else "any time"

    @admin.display(description="open digests")
    def open_digests(self, recipient: Recipient) -> str:
        digests = Digest.objects.filter(
            tenant_id=recipient.tenant_id, recipient_key=recipient.key, is_open=True
        ).order_by("closes_at")
        rows = [
            (
                reverse("admin:people_digest_change", args=[digest.pk]),
                digest.key,
                digest.count,
                display_for_value(digest.closes_at, "-"),
            )
            for digest in digests
        ]
        if not rows:
            return "none"
        return format_html(
            "<table><tr><th>key</th><th>items</th><th>closes</th></tr>{}</table>",
            format_html_join(
                "", '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td></tr>', rows
            ),
        )


@admin.register(Digest)
class DigestAdmin(ReadOnlyModelAdmin):
    list_display = [
        "key",
        "recipient_link",
        "tenant",
        "state",
        "count",
        "window",
        "delivery_state",
        "claimed_until",
    ]
    list_filter = ["is_open"]
    list_select_related = ["tenant", "notification"]
    search_fields = ["=id", "key", "recipient_key", "tenant__name"]
    ordering = ["-created_at"]
    fieldsets = [
        (
            "Digest",
            {
                "fields": [
                    "id",
                    "tenant",
                    "recipient_link",
                    "key",
                    "state",
                    "count",
                    "window",
                    "kept_items",
                ]
            },
        ),
        (
            "Its notification (the tick's queue state)",
            {
                "fields": [
                    "notification_link",
                    "delivery_state",
                    "next_fire_at",
                    "claimed_until",
                    "claim_token",
                ]
            },
        ),
        ("Record", {"fields": ["created_at", "updated_at"]}),
    ]
    # Every line of these fieldsets holds one field.
    readonly_fields = [
        field for _, options in fieldsets for field in options["fields"] if isinstance(field, str)
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The recipient's id for the link, as a subquery of the list's own query: the key is
        # the tenant's name for the person, not a foreign key (a digest outlives a deletion).
        recipient = Recipient.objects.filter(
            tenant_id=OuterRef("tenant_id"), key=OuterRef("recipient_key")
        )
        return super().get_queryset(request).annotate(recipient_id=Subquery(recipient.values("pk")))

    @admin.display(description="recipient", ordering="recipient_key")
    def recipient_link(self, digest: Digest) -> str:
        if digest.recipient_id is None:  # type: ignore[attr-defined]
            return f"(deleted) {digest.recipient_key}"
        url = reverse("admin:people_recipient_change", args=[digest.recipient_id])  # type: ignore[attr-defined]
        return format_html('<a href="{}">{}</a>', url, digest.recipient_key)

    @admin.display(description="state", ordering="is_open")
    def state(self, digest: Digest) -> str:
        return "open" if digest.is_open else "closed"

    @admin.display(description="window")
    def window(self, digest: Digest) -> str:
        opened = display_for_value(digest.created_at, "-")
        return f"{opened} to {display_for_value(digest.closes_at, '-')}"

    @admin.display(description="items kept (first subjects)")
    def kept_items(self, digest: Digest) -> str:
        subjects = [(item.get("subject", ""),) for item in digest.items]
        if not subjects:
            return "none"
        listed = format_html("<ol>{}</ol>", format_html_join("", "<li>{}</li>", subjects))
        rest = digest.count - len(subjects)
        return format_html("{}<p>and {} more</p>", listed, rest) if rest else listed

    @admin.display(description="notification")
    def notification_link(self, digest: Digest) -> str:
        url = reverse("admin:delivery_notification_change", args=[digest.notification_id])
        return format_html('<a href="{}">{}</a>', url, digest.notification_id)

    @admin.display(description="delivery", ordering="notification__state")
    def delivery_state(self, digest: Digest) -> str:
        return digest.notification.get_state_display()

    @admin.display(description="next fire at")
    def next_fire_at(self, digest: Digest) -> str:
        return display_for_value(digest.notification.next_fire_at, "-")

    @admin.display(description="claimed until")
    def claimed_until(self, digest: Digest) -> str:
        return display_for_value(digest.notification.claimed_until, "-")

    @admin.display(description="claim token")
    def claim_token(self, digest: Digest) -> str:
        return display_for_value(digest.notification.claim_token, "-")
