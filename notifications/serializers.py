"""Input and output shapes of the notifications API.

Input serializers check types, sizes and formats only; the rules that tie fields together
(recipients for the email channel, the tenant's own endpoint and project, RRULE and time
zone) live in notifications.services and the checks it applies (delivery.validation),
which every caller goes through.
"""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.timezone import now as utc_now
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from delivery.models import (
    Channel,
    Delivery,
    DeliveryOutcome,
    Notification,
    NotificationSource,
    NotificationState,
)
from delivery.outbox import MAX_DIGEST_SUBJECT, MAX_WINDOW_SECONDS
from delivery.recurrence.skipped import SKIP_COUNT_CAP
from delivery.validation import (
    CATEGORY_PATTERN,
    KEY_PATTERN,
    MAX_KEY_LENGTH,
    MAX_RECIPIENTS,
    subject_error,
)
from outbound.redaction import safe_error_text
from web.fields import (
    EmailAddressField,
    NullableCharField,
    SingleLineCharField,
    StrictIntegerField,
    StrictUUIDField,
)
from web.representation import Representation
from web.serializers import NoBodySerializer, RejectsUndeclaredFields

EARLIEST_FIRE_AT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_FIRE_AT_AHEAD = timedelta(days=36_525)


class _UniqueChannels(serializers.ListField):
    def to_internal_value(self, data: Any) -> list[str]:
        channels = super().to_internal_value(data)
        if len(set(channels)) != len(channels):
            raise serializers.ValidationError("Channels must not repeat.")
        return channels


@extend_schema_field({"type": "string", "maxLength": 200, "pattern": "^[^\\r\\n\\x00]*$"})
class _SubjectField(serializers.CharField):
    """A subject checked as sent: the default trimming would hide a trailing line break."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and (error := subject_error(data)) is not None:
            raise serializers.ValidationError(error)
        return super().to_internal_value(data)


class _WallClockDateTimeField(serializers.DateTimeField):
    """A datetime whose missing UTC offset stays missing: it is wall-clock time in the
    notification's time zone, which the service applies (PATCH may keep the stored zone)."""

    def enforce_timezone(self, value: datetime) -> datetime:
        return value


class _DigestSerializer(RejectsUndeclaredFields, serializers.Serializer):
    key = serializers.RegexField(CATEGORY_PATTERN, max_length=64)
    window_seconds = StrictIntegerField(min_value=1, max_value=MAX_WINDOW_SECONDS)
    subject = SingleLineCharField(
        max_length=MAX_DIGEST_SUBJECT,
        required=False,
        trim_whitespace=False,
        help_text="The digest email's subject, followed by its count (\"Your week (3 "
        'updates)"); the latest join of the window that names one sets it. Without one: '
        '"3 updates: " and the first events\' subjects.',
    )

    def validate_key(self, value: str) -> str:
        if not re.fullmatch(CATEGORY_PATTERN, value):
            raise serializers.ValidationError("Letters, digits and . _ - only.")
        return value


class NotificationWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/notifications; PATCH uses it with partial=True."""

    channels = _UniqueChannels(
        child=serializers.ChoiceField(choices=Channel.choices),
        allow_empty=False,
        min_length=1,
        max_length=2,
    )
    email_to = serializers.ListField(
        child=EmailAddressField(), max_length=MAX_RECIPIENTS, required=False
    )
    recipients = serializers.ListField(
        child=serializers.RegexField(KEY_PATTERN, max_length=MAX_KEY_LENGTH),
        max_length=MAX_RECIPIENTS,
        required=False,
        help_text="Ids of the tenant's recipients (PUT /v1/recipients/{id}) instead of "
        "`email_to`: their addresses, preferences and send windows are read when it is sent.",
    )
    category = serializers.RegexField(
        CATEGORY_PATTERN,
        max_length=64,
        required=False,
        allow_blank=True,
        help_text="What it is about, for recipients' preferences and one-click unsubscribe; "
        "categories in CRITICAL_CATEGORIES ignore opt-outs.",
    )
    digest = _DigestSerializer(
        required=False,
        help_text="Join the recipient's open digest for `key` instead of sending alone: one "
        "email, when `window_seconds` after the digest opened have passed, lists its first "
        "10 events and how many more. The answer is the digest's email notification.",
    )
    subject = _SubjectField(max_length=200)
    body = serializers.CharField(max_length=10_000, allow_blank=True, trim_whitespace=False)
    webhook_endpoint = StrictUUIDField(required=False, allow_null=True)
    fire_at = _WallClockDateTimeField(
        required=False,
        help_text=(
            "When the schedule starts (default now; a past time is due at once). Without a "
            "UTC offset it is wall-clock time in `timezone`; it is truncated to whole seconds. "
            "A one-shot fires at fire_at; a recurring notification first fires at the rule's "
            "first instance at or after fire_at (fire_at itself only when it matches the rule)."
        ),
    )
    rrule = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text=(
            "RFC 5545 RRULE without DTSTART, anchored at fire_at (python-dateutil semantics); "
            "empty for a one-shot. The first occurrence is the rule's first instance at or "
            "after fire_at; parts the rule does not give (such as the time of day) are taken "
            "from fire_at, except that a rule naming BYHOUR or BYMINUTE without BYSECOND fires "
            "at second 0. A rule whose occurrences cannot be found within "
            "RECURRENCE_BUDGET_MS of CPU is rejected with 400 rrule-too-costly. A rule with no "
            "instance at or after fire_at (COUNT or UNTIL ends it "
            "before) is rejected with 400. Changing rrule, fire_at or timezone restarts the "
            "schedule from fire_at."
        ),
    )
    timezone = serializers.CharField(
        max_length=64, required=False, help_text='IANA time zone of the RRULE (default "UTC").'
    )
    project_id = StrictUUIDField(required=False, allow_null=True)

    def validate_fire_at(self, value: datetime) -> datetime:
        # Recurrence works in local time: far-off instants would overflow the calendar. A
        # wall-clock value is checked as if UTC: its zone's offset moves it by hours only.
        instant = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        if not EARLIEST_FIRE_AT <= instant <= utc_now() + LATEST_FIRE_AT_AHEAD:
            raise serializers.ValidationError("Must be after 1970 and at most 100 years from now.")
        return value

    def service_arguments(self) -> dict[str, Any]:
        """The validated body as keyword arguments of the notification services."""
        arguments = dict(self.validated_data)
        if "webhook_endpoint" in arguments:
            arguments["webhook_endpoint_id"] = arguments.pop("webhook_endpoint")
        return arguments


class NotificationPatchSerializer(NotificationWriteSerializer):
    """The body of PATCH /v1/notifications/{id}: any subset; the project and a digest are
    fixed."""

    # None takes an inherited field off (DRF's way); the stubs see a field's type changed.
    project_id = None  # type: ignore[assignment]
    digest = None  # type: ignore[assignment]


class NotificationSerializer(serializers.ModelSerializer):
    channels = serializers.ListField(child=serializers.ChoiceField(choices=Channel.choices))
    email_to = serializers.ListField(child=serializers.EmailField())
    recipients = serializers.ListField(child=serializers.CharField())
    webhook_endpoint = serializers.UUIDField(source="webhook_endpoint_id", allow_null=True)
    project_id = serializers.UUIDField(allow_null=True)
    fire_at = serializers.DateTimeField(source="recurrence_anchor", allow_null=True)
    state = serializers.ChoiceField(choices=NotificationState.choices)
    # A declared field, taken off the class by the metaclass: it does not replace the
    # serializer's own `source`, as the stubs read it.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=NotificationSource.choices,
        help_text="`api`: made through the API; `system`: the product's own announcements "
        "(a project's activation or failure, its invitations).",
    )

    class Meta:
        model = Notification
        fields = [
            "id",
            "project_id",
            "channels",
            "email_to",
            "recipients",
            "category",
            "subject",
            "body",
            "webhook_endpoint",
            "fire_at",
            "rrule",
            "timezone",
            "next_fire_at",
            "occurrence",
            "error_count",
            "last_error",
            "last_fired_at",
            "state",
            "source",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


# A list page renders its rows through this, fields compiled once (web.representation).
NOTIFICATIONS = Representation(NotificationSerializer)


class SkippedSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        source="skipped_count",
        help_text="How many occurrences were skipped (on a rule narrowed by BY* parts, "
        f"{SKIP_COUNT_CAP} means at least {SKIP_COUNT_CAP}).",
    )
    first = serializers.DateTimeField(source="skipped_first")
    last = serializers.DateTimeField(source="skipped_last")


class SafeErrorField(serializers.CharField):
    """An error as a tenant may read it: no URL, host, IP or e-mail address."""

    def to_representation(self, value: str) -> str:
        return safe_error_text(value)


class DeliverySerializer(serializers.ModelSerializer):
    error_category = NullableCharField()
    error = SafeErrorField(
        read_only=True,
        help_text="What went wrong, safe to show: it names no host, URL or address; empty "
        "when nothing did.",
    )
    endpoint_id = serializers.UUIDField(
        read_only=True,
        allow_null=True,
        help_text="The webhook endpoint of a webhook attempt (kept after the endpoint is "
        "deleted); null for an e-mail.",
    )
    attempt = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The attempt of this occurrence, 1 for the first; null on rows logged "
        "before attempts were recorded.",
    )
    recipient = serializers.CharField(
        read_only=True,
        help_text="Whose copy of an e-mail the row is about (each recipient gets an e-mail of "
        "their own): the recipient's id, or the address for a notification sent to "
        "email_to; empty for a webhook or the whole occurrence.",
    )
    late_ms = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="attempted_at minus the time this attempt was scheduled for (the "
        "occurrence's due time, the end of its backoff for a retry, the end of its deferral "
        "for a deferred channel); null on rows that are not a channel attempt.",
    )
    skipped = serializers.SerializerMethodField(
        help_text='Outcome "skipped" only: the occurrences a late recurring notification '
        "jumped over (fire once now); null otherwise."
    )

    class Meta:
        model = Delivery
        fields = [
            "id",
            "notification_id",
            "endpoint_id",
            "occurrence",
            "attempt",
            "channel",
            "recipient",
            "outcome",
            "http_status",
            "error_category",
            "error",
            "duration_ms",
            "attempted_at",
            "late_ms",
            "skipped",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(SkippedSerializer(allow_null=True))
    def get_skipped(self, delivery: Delivery) -> dict[str, Any] | None:
        if delivery.outcome != DeliveryOutcome.SKIPPED:
            return None
        return SkippedSerializer(delivery).data


# Set here, below the answer it names: a body field it shows is "read-only".
NotificationWriteSerializer.representation = NotificationSerializer


class NotificationRetrySerializer(NoBodySerializer):
    representation = NotificationSerializer
