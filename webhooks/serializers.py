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

from delivery.models import RATE_LIMIT_MAX, EndpointHealth, WebhookEndpoint
from web.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from web.serializers import NoBodySerializer, RejectsUndeclaredFields
from webhooks.event_types import NAME_PATTERN
from webhooks.models import PortalCapability
from webhooks.portal.sessions import EXPIRES_IN_MAX, EXPIRES_IN_MIN

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
EventTypeWriteSerializer.representation = EventTypeSerializer
EventTypePatchSerializer.representation = EventTypeSerializer
MessageWriteSerializer.representation = MessageSerializer
PortalSessionWriteSerializer.representation = PortalSessionSerializer


class WebhookEndpointRotateSecretSerializer(NoBodySerializer):
    representation = WebhookEndpointSecretSerializer
