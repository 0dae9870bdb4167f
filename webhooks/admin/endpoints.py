"""Webhook endpoints in the admin: switch them on or off, correct the URL. The secrets are
excluded from every form and page; creating and rotating (which show a secret once) happen
through the API."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.timezone import now as utc_now

from delivery.models import EndpointHealth, WebhookEndpoint
from web.admin import ServiceSaveAdmin
from web.errors import InvalidInput
from webhooks import endpoints as webhook_endpoints
from webhooks.admin.messages import AddressedFilter
from webhooks.models import PRODUCT_EVENT_TYPES, EventType

DISABLED_BY_SUPPORT = "disabled by support"


_FIELDS = (
    "tenant",
    "application_id",
    "url",
    "enabled",
    "event_types",
    "disabled_reason",
    "circuit",
    "consecutive_failures",
    "failed_deliveries",
    "circuit_open_until",
    "last_failure_at",
    "failing_since",
    "rate_limit",
    "id",
    "created_at",
    "updated_at",
)


class WebhookEndpointForm(forms.ModelForm):
    """The subscriptions as a list of the endpoint's tenant's event types to tick, stored as
    the API stores them: the names ticked, or null (none ticked) for every type."""

    event_types = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every event type (message.attempt.exhausted and "
        "endpoint.disabled only when ticked).",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["event_types"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        picker = self.fields["event_types"]
        assert isinstance(picker, forms.MultipleChoiceField)
        picker.choices = event_type_choices(self.instance)

    def clean_event_types(self) -> list[str] | None:
        return self.cleaned_data["event_types"] or None


def event_type_choices(endpoint: WebhookEndpoint) -> list[tuple[str, str]]:
    """The tenant's active event types, the product's own among them, by name; a type the
    endpoint still names after it was archived is listed too, marked, so that saving the
    form as shown keeps the subscription as stored."""
    active = set(PRODUCT_EVENT_TYPES) | set(
        EventType.objects.filter(tenant_id=endpoint.tenant_id, archived=False).values_list(
            "name", flat=True
        )
    )
    subscribed = set(endpoint.event_types or ())
    return [
        (name, name if name in active else f"{name} (archived)")
        for name in sorted(active | subscribed)
    ]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ServiceSaveAdmin):
    change_list_template = "admin/queue_change_list.html"
    list_display = [
        *("url", "tenant", "application_id", "enabled", "circuit", "disabled_reason"),
        "created_at",
    ]
    list_filter = [AddressedFilter, "enabled", "disabled_reason"]
    list_select_related = ["tenant"]
    search_fields = ["url", "tenant__name", "=application_id"]
    ordering = ["-created_at"]
    form = WebhookEndpointForm
    fields = _FIELDS
    # Only the URL, the switch and the subscriptions are edited here. The breaker's state is
    # the scheduler's: editing the URL (or rotating the secret through the API) closes the
    # circuit.
    readonly_fields = [field for field in _FIELDS if field not in ("url", "enabled", "event_types")]
    actions = ["enable", "disable"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    refusals = (InvalidInput, WebhookEndpoint.DoesNotExist)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="circuit")
    def circuit(self, endpoint: WebhookEndpoint) -> str:
        return EndpointHealth(endpoint.health(now=utc_now())).label

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: forms.ModelForm, change: bool
    ) -> None:
        changed = form.changed_data
        webhook_endpoints.webhook_endpoint_update(
            tenant=obj.tenant,
            endpoint_id=obj.pk,
            url=form.cleaned_data["url"] if "url" in changed else None,
            enabled=form.cleaned_data["enabled"] if "enabled" in changed else None,
            disabled_reason=DISABLED_BY_SUPPORT,
            event_types=(
                form.cleaned_data["event_types"]
                if "event_types" in changed
                else webhook_endpoints.UNCHANGED
            ),
        )

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=False)

    def _switch(self, request: HttpRequest, queryset: QuerySet, *, enabled: bool) -> None:
        for endpoint in queryset.select_related("tenant"):
            webhook_endpoints.webhook_endpoint_update(
                tenant=endpoint.tenant,
                endpoint_id=endpoint.id,
                enabled=enabled,
                disabled_reason=DISABLED_BY_SUPPORT,
            )
        state = "enabled" if enabled else "disabled"
        self.message_user(request, f"{queryset.count()} endpoint(s) {state}.", messages.SUCCESS)
