"""Input and output shapes of the notifications API.

Input serializers check types, sizes and formats only; the rules that tie fields together
(recipients for the email channel, the tenant's own endpoint and project, RRULE and time
zone) live in notifications.services and the checks it applies (notifications.validation),
which every caller goes through.
"""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.timezone import now as utc_now
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from notifications.digests import MAX_WINDOW_SECONDS
from notifications.event_types import NAME_PATTERN
from notifications.models import (
    RATE_LIMIT_MAX,
    Channel,
    Delivery,
    DeliveryOutcome,
    EndpointHealth,
    Notification,
    NotificationSource,
    NotificationState,
    WebhookEndpoint,
)
from notifications.recipients import KEY_PATTERN, MAX_KEY_LENGTH
from notifications.recurrence.skipped import SKIP_COUNT_CAP
from notifications.validation import CATEGORY_PATTERN, MAX_RECIPIENTS, subject_error
from outbound.redaction import safe_error_text
from web.fields import (
    EmailAddressField,
    NullableCharField,
    StrictBooleanField,
    StrictCharField,
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


MAX_SUBSCRIBED_TYPES = 100


@extend_schema_field({"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,256}$"})
class _EventTypeNameField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        name = super().to_internal_value(data)
        if not NAME_PATTERN.fullmatch(name):
            raise serializers.ValidationError(
                "Must be 1 to 256 of a-z, A-Z, 0-9, '.', '_' and '-'."
            )
        return name


class EventTypeWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/event-types."""

    name = _EventTypeNameField()
    description = StrictCharField(
        max_length=1000, required=False, allow_blank=True, trim_whitespace=False
    )


class EventTypePatchSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of PATCH /v1/event-types/{id}: the name is fixed (endpoints subscribe by it)."""

    description = StrictCharField(
        max_length=1000, required=False, allow_blank=True, trim_whitespace=False
    )
    archived = StrictBooleanField(required=False)


class EventTypeSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(read_only=True)
    description = serializers.CharField(read_only=True)
    archived = serializers.BooleanField(read_only=True)
    product = serializers.BooleanField(
        read_only=True,
        help_text="One of the product's own types, which exist in every tenant and cannot "
        "be changed or archived.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)


class MessageWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/messages."""

    event_type = _EventTypeNameField()
    payload = serializers.DictField(
        help_text="The event's data: any JSON object of at most 256 KiB, sent as `data`."
    )
    event_id = StrictCharField(
        max_length=256,
        required=False,
        allow_null=True,
        help_text="Deduplicates for 24 hours: a message with the same event_id answers the "
        "first one and queues nothing.",
    )


class MessageSerializer(serializers.Serializer):
    id = serializers.UUIDField(
        read_only=True, help_text="Deliveries carry it as webhook-id `msg_<id>`."
    )
    event_type = serializers.CharField(read_only=True)
    event_id = serializers.CharField(read_only=True, allow_null=True)
    payload = serializers.DictField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    endpoints = serializers.ListField(
        child=serializers.UUIDField(),
        source="endpoint_ids",
        read_only=True,
        help_text="The endpoints the message was queued to (enabled and subscribed then).",
    )


class MessageAttemptSerializer(serializers.Serializer):
    endpoint_id = serializers.UUIDField(read_only=True)
    status = serializers.ChoiceField(
        choices=["pending", "delivered", "failed", "parked"],
        read_only=True,
        help_text="Of the latest queueing to this endpoint: pending (queued or backing off), "
        "delivered, failed (out of attempts) or parked.",
    )
    attempts = serializers.IntegerField(read_only=True)
    last_outcome = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="The outcome of the last attempt, as the delivery log's `outcome`; null "
        "before the first.",
    )
    last_http_status = serializers.IntegerField(read_only=True, allow_null=True)
    last_attempted_at = serializers.DateTimeField(read_only=True, allow_null=True)
    next_attempt_at = serializers.DateTimeField(read_only=True, allow_null=True)


class MessageResendSerializer(NoBodySerializer):
    representation = MessageAttemptSerializer


class WebhookEndpointWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/webhook-endpoints; PATCH uses it with partial=True."""

    url = serializers.URLField(max_length=2000, help_text="https only; must resolve publicly.")
    enabled = StrictBooleanField(required=False)
    event_types = serializers.ListField(
        child=_EventTypeNameField(),
        max_length=MAX_SUBSCRIBED_TYPES,
        allow_null=True,
        required=False,
        help_text="The event types this endpoint receives messages of (active types of the "
        "tenant); null, the default, receives every type.",
    )
    disabled = StrictBooleanField(
        required=False, help_text="The opposite of `enabled`; `false` enables it again."
    )
    rate_limit = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=RATE_LIMIT_MAX,
        help_text="Deliveries per second across every tick process; null: no limit.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "disabled" in attrs:
            enabled = not attrs.pop("disabled")
            if attrs.get("enabled", enabled) != enabled:
                raise serializers.ValidationError(
                    {"disabled": ["Contradicts enabled; send one of them."]}
                )
            attrs["enabled"] = enabled
        return attrs


class RecoverAcceptedSerializer(serializers.Serializer):
    """The recovery task started: follow it at GET /v1/tasks/{task_id}."""

    task_id = serializers.UUIDField(read_only=True)


class WebhookEndpointRecoverSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/webhook-endpoints/{id}/recover: the window [since, until)."""

    since = serializers.DateTimeField(help_text="At most 14 days back.")
    until = serializers.DateTimeField(
        required=False, help_text="Defaults to now; a later time is taken as now."
    )

    representation = RecoverAcceptedSerializer


class EndpointHealthSerializer(serializers.Serializer):
    """The endpoint's health: `open` while its circuit breaker defers its deliveries (until
    `open_until`), `failing` while every delivery since its last success failed (a 3xx or
    4xx answer included), else `healthy`."""

    schema_description = (
        "`open` while the circuit breaker defers the endpoint's deliveries (until "
        "`open_until`), `failing` while every delivery since its last success failed (a 3xx "
        "or 4xx answer included), else `healthy`."
    )

    state = serializers.ChoiceField(choices=EndpointHealth.choices, read_only=True)
    consecutive_failures = serializers.IntegerField(
        read_only=True, help_text="Failed deliveries since the last success, any cause."
    )
    open_until = serializers.DateTimeField(read_only=True, allow_null=True)
    last_failure_at = serializers.DateTimeField(read_only=True, allow_null=True)


class WebhookEndpointSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    url = serializers.URLField(read_only=True)
    enabled = serializers.BooleanField(read_only=True)
    event_types = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        allow_null=True,
        help_text="The event types it receives messages of; null: every type.",
    )
    disabled = serializers.SerializerMethodField()
    rate_limit = serializers.IntegerField(read_only=True, allow_null=True)
    disabled_reason = serializers.SerializerMethodField(
        help_text="Why it is disabled: `failing` when Tickwork retired it (every delivery "
        "failed for ENDPOINT_DISABLE_AFTER_HOURS), `manual` when it was switched off, or "
        "the reason the tick recorded (a 410 Gone answer); null while enabled."
    )
    created_at = serializers.DateTimeField(read_only=True)
    health = serializers.SerializerMethodField()

    def get_disabled(self, endpoint: WebhookEndpoint) -> bool:
        return not endpoint.enabled

    @extend_schema_field({"type": "string", "nullable": True})
    def get_disabled_reason(self, endpoint: WebhookEndpoint) -> str | None:
        if endpoint.enabled:
            return None
        return endpoint.disabled_reason or "manual"

    @extend_schema_field(EndpointHealthSerializer)
    def get_health(self, endpoint: WebhookEndpoint) -> dict[str, Any]:
        now = utc_now()
        return EndpointHealthSerializer(
            {
                "state": endpoint.health(now=now),
                "consecutive_failures": max(
                    endpoint.failed_deliveries, endpoint.consecutive_failures
                ),
                "open_until": endpoint.circuit_open_until,
                "last_failure_at": endpoint.last_failure_at,
            }
        ).data


class WebhookEndpointSecretSerializer(WebhookEndpointSerializer):
    """The endpoint with its signing secret: the answer of create and rotate-secret only."""

    schema_description = "The endpoint with its signing secret, shown this once."

    secret = serializers.CharField(read_only=True)


# Set here, below the answers they name: a body field these show is "read-only".
NotificationWriteSerializer.representation = NotificationSerializer
WebhookEndpointWriteSerializer.representation = WebhookEndpointSecretSerializer
EventTypeWriteSerializer.representation = EventTypeSerializer
EventTypePatchSerializer.representation = EventTypeSerializer
MessageWriteSerializer.representation = MessageSerializer


class NotificationRetrySerializer(NoBodySerializer):
    representation = NotificationSerializer


class WebhookEndpointRotateSecretSerializer(NoBodySerializer):
    representation = WebhookEndpointSecretSerializer
