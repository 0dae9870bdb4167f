"""Input and output shapes of the webhooks API.

Input serializers check types, sizes and formats only; the rules that tie fields together
(recipients for the email channel, the tenant's own endpoint and project, RRULE and time
zone) live in notifications.services and the checks it applies (delivery.validation),
which every caller goes through.
"""

from typing import Any

from django.utils.timezone import now as utc_now
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from delivery.models import RATE_LIMIT_MAX, Delivery, EndpointHealth, WebhookEndpoint
from outbound.redaction import safe_error_text
from web.fields import (
    NullableCharField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from web.serializers import NoBodySerializer, RejectsUndeclaredFields
from webhooks.applications import UID_PATTERN, UID_RULE
from webhooks.event_types import NAME_PATTERN
from webhooks.messages import ATTEMPT_OUTCOMES
from webhooks.models import PortalCapability
from webhooks.portal.sessions import EXPIRES_IN_MAX, EXPIRES_IN_MIN

MAX_SUBSCRIBED_TYPES = 100
MAX_METADATA_KEYS = 50


@extend_schema_field({"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,256}$"})
class _EventTypeNameField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        name = super().to_internal_value(data)
        if not NAME_PATTERN.fullmatch(name):
            raise serializers.ValidationError(
                "Must be 1 to 256 of a-z, A-Z, 0-9, '.', '_' and '-'."
            )
        return name


@extend_schema_field({"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,256}$"})
class _ApplicationUidField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        uid = super().to_internal_value(data)
        if not UID_PATTERN.fullmatch(uid):
            raise serializers.ValidationError(UID_RULE)
        return uid


def _application_reference(help_text: str) -> _ApplicationUidField:
    return _ApplicationUidField(required=False, allow_null=True, help_text=help_text)


class _MetadataField(serializers.DictField):
    def __init__(self, **kwargs: Any) -> None:
        child = StrictCharField(max_length=1000, allow_blank=True, trim_whitespace=False)
        super().__init__(child=child, **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        metadata = super().to_internal_value(data)
        if any(len(key) > 256 for key in metadata):
            raise serializers.ValidationError("Keys must be at most 256 characters.")
        if len(metadata) > MAX_METADATA_KEYS:
            raise serializers.ValidationError(f"At most {MAX_METADATA_KEYS} keys.")
        return metadata


class ApplicationSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    uid = serializers.CharField(
        read_only=True, help_text="The tenant's own key for its customer; unique in the tenant."
    )
    name = serializers.CharField(read_only=True)
    metadata = serializers.DictField(child=serializers.CharField(), read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)


class ApplicationWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/applications; PATCH uses it with partial=True."""

    representation = ApplicationSerializer

    uid = _ApplicationUidField(
        help_text="The tenant's own key for its customer, unique among its live "
        "applications; `{id}` in the application's paths may be it instead of the id."
    )
    name = StrictCharField(max_length=256)
    metadata = _MetadataField(
        required=False, help_text="Strings of the tenant's own about the customer."
    )


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

    application = _application_reference(
        "The application (id or uid) whose endpoints receive it; null, the default: the "
        "tenant's own endpoints (those of no application)."
    )
    event_type = _EventTypeNameField()
    payload = serializers.DictField(
        help_text="The event's data: any JSON object of at most 256 KiB, sent as `data`."
    )
    event_id = StrictCharField(
        max_length=256,
        required=False,
        allow_null=True,
        help_text="Deduplicates for 24 hours within the application: a message to the same "
        "application with the same event_id answers the first one and queues nothing.",
    )


class MessageSerializer(serializers.Serializer):
    id = serializers.UUIDField(
        read_only=True, help_text="Deliveries carry it as webhook-id `msg_<id>`."
    )
    application = serializers.UUIDField(
        source="application_id",
        read_only=True,
        allow_null=True,
        help_text="The id of the application it was addressed to; null: the tenant's own.",
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
    """One attempt to send a message to an endpoint: a row of the delivery log."""

    id = serializers.IntegerField(
        read_only=True, help_text="The delivery log row's id, as /v1/deliveries lists it."
    )
    notification_id = serializers.UUIDField(
        read_only=True,
        help_text="The delivery (a notification) the attempt sent; the delivery log is keyed "
        "by it (/v1/deliveries?notification_id=).",
    )
    endpoint_id = serializers.UUIDField(
        read_only=True,
        allow_null=True,
        help_text="Kept after the endpoint is deleted; null on rows logged before attempts "
        "named their endpoint.",
    )
    attempt = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The attempt of its delivery, 1 for the first (a resend that brings a "
        "delivery forward starts again at 1); null on rows logged before it was recorded.",
    )
    outcome = serializers.ChoiceField(
        choices=[outcome.value for outcome in ATTEMPT_OUTCOMES],
        read_only=True,
        help_text="delivered, failed, or timeout (a failure with no answer in time). "
        "Deferrals are not attempts.",
    )
    http_status = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The endpoint's answer; null when none came."
    )
    error_category = NullableCharField(
        help_text="Why a failed attempt failed: timeout, connection, http_3xx, http_4xx, "
        "http_5xx, rate_limited, ssrf_blocked, invalid_request, endpoint_disabled, internal; "
        "null when delivered."
    )
    error = serializers.SerializerMethodField(
        help_text="What went wrong, safe to show: it names no host, URL or address; empty "
        "when nothing did."
    )
    created_at = serializers.DateTimeField(read_only=True)

    def get_error(self, attempt: Delivery) -> str:
        return safe_error_text(attempt.error)


class MessageEndpointSerializer(serializers.Serializer):
    endpoint_id = serializers.UUIDField(read_only=True)
    notification_id = serializers.UUIDField(
        read_only=True,
        help_text="The delivery (a notification) of the latest queueing to this endpoint; "
        "the delivery log is keyed by it (/v1/deliveries?notification_id=).",
    )
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
    representation = MessageEndpointSerializer


class WebhookEndpointWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/webhook-endpoints; PATCH uses it with partial=True."""

    url = serializers.URLField(max_length=2000, help_text="https only; must resolve publicly.")
    description = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text="What the endpoint is for, shown beside its URL (default: empty).",
    )
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


class WebhookEndpointCreateSerializer(WebhookEndpointWriteSerializer):
    """The body of POST /v1/webhook-endpoints: the application is chosen once, at create."""

    application = _application_reference(
        "The application (id or uid) whose messages it receives, for good; null, the "
        "default: the tenant's own endpoint, which receives the messages of no application "
        "and the product's own events."
    )


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
    application = serializers.UUIDField(
        source="application_id",
        read_only=True,
        allow_null=True,
        help_text="The id of its application; null: the tenant's own endpoint.",
    )
    url = serializers.URLField(read_only=True)
    description = serializers.CharField(read_only=True)
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
        "failed for ENDPOINT_DISABLE_AFTER_HOURS), `application_deleted` when its "
        "application was deleted, `manual` when it was switched off, or "
        "the reason the tick recorded (a 410 Gone answer); null while enabled."
    )
    created_at = serializers.DateTimeField(read_only=True)
    health = serializers.SerializerMethodField()

    def get_disabled(self, endpoint: WebhookEndpoint) -> bool:
        return not endpoint.enabled

    @extend_schema_field({"type": "string", "nullable": True})
    def get_disabled_reason(self, endpoint: WebhookEndpoint) -> str | None:
        return None if endpoint.enabled else endpoint.disabled_reason

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


class WebhookEndpointSigningSecretSerializer(serializers.Serializer):
    """The endpoint's current signing secret (`whsec_…`)."""

    secret = serializers.CharField(read_only=True)


class PortalSessionWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of POST /v1/applications/{id}/portal-sessions."""

    capabilities = serializers.ListField(
        child=serializers.ChoiceField(choices=PortalCapability.choices),
        max_length=len(PortalCapability.choices),
        required=False,
        help_text="What the session may do; `view` is always granted. Default: all.",
    )
    expires_in = StrictIntegerField(
        required=False,
        min_value=EXPIRES_IN_MIN,
        max_value=EXPIRES_IN_MAX,
        help_text="Seconds until the link stops working (default 3600, at most 7 days).",
    )


class PortalSessionSerializer(serializers.Serializer):
    """A new portal session: `url` opens the portal page, `token` is its bearer token; both
    are shown this once."""

    id = serializers.UUIDField(read_only=True)
    url = serializers.CharField(read_only=True)
    token = serializers.CharField(read_only=True, source="plaintext")
    expires_at = serializers.DateTimeField(read_only=True)


class PortalCallerSerializer(serializers.Serializer):
    application_id = serializers.UUIDField(
        read_only=True,
        allow_null=True,
        help_text="The application a portal session is confined to; null: the whole tenant.",
    )
    capabilities = serializers.ListField(child=serializers.CharField(), read_only=True)


# Set here, below the answers they name: a body field these show is "read-only".
WebhookEndpointWriteSerializer.representation = WebhookEndpointSecretSerializer
WebhookEndpointCreateSerializer.representation = WebhookEndpointSecretSerializer
EventTypeWriteSerializer.representation = EventTypeSerializer
EventTypePatchSerializer.representation = EventTypeSerializer
MessageWriteSerializer.representation = MessageSerializer
PortalSessionWriteSerializer.representation = PortalSessionSerializer


class WebhookEndpointRotateSecretSerializer(NoBodySerializer):
    representation = WebhookEndpointSecretSerializer
