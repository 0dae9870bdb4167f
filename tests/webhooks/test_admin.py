"""The support admin of webhooks: endpoints without secrets, enabled and disabled, edited
through the service and never added there; messages, read-only, with their deliveries per
endpoint and their latest attempts."""

from delivery.models import Delivery, Notification, WebhookEndpoint
from tests.delivery.factories import make_endpoint, make_tenant
from webhooks.applications import application_create
from webhooks.endpoints import webhook_endpoint_update
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message
from webhooks.models import EventType


def test_endpoint_pages_never_show_secrets(admin_client, tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        retired_secrets=[{"secret": "whsec_previousSecretValue", "until": "2999-01-01T00:00:00Z"}],
        disabled_reason="410 Gone",
    )

    listing = admin_client.get("/admin/delivery/webhookendpoint/")
    change = admin_client.get(f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/")

    assert listing.status_code == change.status_code == 200
    for page in (listing.content.decode(), change.content.decode()):
        assert endpoint.secret not in page
        assert "whsec_previousSecretValue" not in page
    assert "410 Gone" in listing.content.decode()


def test_enable_and_disable_actions(admin_client, tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    url = "/admin/delivery/webhookendpoint/"

    admin_client.post(url, {"action": "disable", "_selected_action": [endpoint.pk]})
    disabled = WebhookEndpoint.objects.get(pk=endpoint.pk)
    admin_client.post(url, {"action": "enable", "_selected_action": [endpoint.pk]})
    enabled = WebhookEndpoint.objects.get(pk=endpoint.pk)

    assert (disabled.enabled, disabled.disabled_reason) == (False, "disabled by support")
    assert (enabled.enabled, enabled.disabled_reason) == (True, "")


def test_endpoint_edits_go_through_the_service(admin_client, tenant, public_dns):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    url = f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/"

    response = admin_client.post(url, {"url": "https://hooks.example.com/y"})

    stored = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert response.status_code == 302
    assert (stored.url, stored.secret) == ("https://hooks.example.com/y", endpoint.secret)
    assert stored.enabled is False
    assert stored.disabled_reason == "disabled by support"


def test_an_unsafe_endpoint_url_is_refused_with_its_reason(admin_client, tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    url = f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/"

    response = admin_client.post(
        url, {"url": "https://127.0.0.1/hook", "enabled": "on"}, follow=True
    )

    assert "Nothing was saved: url:" in response.content.decode()
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).url == "https://hooks.example.com/x"


def test_endpoints_are_not_added_in_the_admin(admin_client):
    assert admin_client.get("/admin/delivery/webhookendpoint/add/").status_code == 403


def test_a_message_s_page_shows_its_deliveries_per_endpoint(admin_client):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={"k": 1})

    listed = admin_client.get("/admin/webhooks/message/")
    page = admin_client.get(f"/admin/webhooks/message/{message.id}/change/")
    types = admin_client.get("/admin/webhooks/eventtype/")

    assert listed.status_code == page.status_code == types.status_code == 200
    assert "order.shipped" in listed.content.decode()
    assert str(endpoint.id) in page.content.decode()
    assert "pending" in page.content.decode()


def test_a_delivery_s_page_shows_the_event_it_sends_with_its_message_s_payload(admin_client):
    tenant = make_tenant()
    make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(
        tenant=tenant, event_type="order.shipped", payload={"stored": "with-the-message"}
    )
    delivery = Notification.objects.get(message=message)

    page = admin_client.get(f"/admin/delivery/notification/{delivery.id}/change/")

    assert page.status_code == 200
    assert "with-the-message" in page.content.decode()


def test_a_message_s_page_shows_its_attempts_with_why_they_failed_and_changes_nothing(
    admin_client,
):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={"k": 1})
    delivery = Notification.objects.get(message=message)
    for outcome, category, error in (
        ("failed", "http_5xx", "webhook answered HTTP 502"),
        ("deferred", "circuit_open", "deferred until later"),
    ):
        Delivery.objects.create(
            tenant=tenant,
            notification_id=delivery.id,
            endpoint_id=endpoint.id,
            occurrence=1,
            attempt=1,
            channel="webhook",
            outcome=outcome,
            http_status=502 if outcome == "failed" else None,
            error_category=category,
            error=error,
        )
    page = f"/admin/webhooks/message/{message.id}"

    shown = admin_client.get(f"{page}/change/").content.decode()
    changed = admin_client.post(f"{page}/change/", {"event_type": "other"})
    deleted = admin_client.post(f"{page}/delete/", {"post": "yes"})

    assert f"/admin/delivery/notification/{delivery.id}/change/" in shown
    assert "http_5xx" in shown and "webhook answered HTTP 502" in shown
    # A deferral is no attempt.
    assert "circuit_open" not in shown
    assert 'name="event_type"' not in shown
    assert changed.status_code == deleted.status_code == 403
    assert Notification.objects.filter(message=message).count() == 1


def test_applications_are_listed_and_shown_on_endpoints_and_messages(admin_client, tenant):
    event_type_create(tenant=tenant, name="invoice.paid")
    application = application_create(tenant=tenant, uid="acme-customer", name="Acme")
    endpoint = make_endpoint(
        tenant=tenant, url="https://hooks.example.com/x", application_id=application.pk
    )
    publish_message(
        tenant=tenant, event_type="invoice.paid", payload={}, application="acme-customer"
    )

    applications = admin_client.get("/admin/webhooks/application/?q=acme-customer")
    endpoints = admin_client.get("/admin/delivery/webhookendpoint/?addressed=application")
    own_endpoints = admin_client.get("/admin/delivery/webhookendpoint/?addressed=own")
    messages = admin_client.get("/admin/webhooks/message/?addressed=application")

    assert applications.status_code == endpoints.status_code == messages.status_code == 200
    assert "acme-customer" in applications.content.decode()
    assert str(application.pk) in endpoints.content.decode()
    assert str(application.pk) not in own_endpoints.content.decode()
    assert endpoint.secret not in endpoints.content.decode()
    assert "Acme (acme-customer)" in messages.content.decode()


def test_the_endpoint_form_offers_the_tenant_s_event_types_and_stores_the_ones_ticked(
    admin_client, tenant
):
    for name in ("invoice.paid", "invoice.failed", "old.type"):
        event_type_create(tenant=tenant, name=name)
    EventType.objects.filter(tenant=tenant, name="old.type").update(archived=True)
    other = make_tenant()
    event_type_create(tenant=other, name="other.tenant.type")
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    url = f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/"

    form = admin_client.get(url).context["adminform"].form
    choices = dict(form.fields["event_types"].choices)
    saved = admin_client.post(
        url,
        {"url": endpoint.url, "enabled": "on", "event_types": ["invoice.paid", "project.active"]},
    )
    subscribed = WebhookEndpoint.objects.get(pk=endpoint.pk).event_types
    cleared = admin_client.post(url, {"url": endpoint.url, "enabled": "on"})

    assert {"invoice.paid", "invoice.failed", "project.active"} <= choices.keys()
    assert "old.type" not in choices and "other.tenant.type" not in choices
    assert 'type="checkbox" name="event_types" value="invoice.failed"' in (
        admin_client.get(url).content.decode()
    )
    assert (saved.status_code, cleared.status_code) == (302, 302)
    assert subscribed == ["invoice.paid", "project.active"]
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).event_types is None  # every type


def test_an_archived_type_an_endpoint_still_names_stays_ticked_and_marked(admin_client, tenant):
    event_type_create(tenant=tenant, name="old.type")
    endpoint = make_endpoint(
        tenant=tenant, url="https://hooks.example.com/x", event_types=["old.type"]
    )
    EventType.objects.filter(tenant=tenant, name="old.type").update(archived=True)

    form = (
        admin_client.get(f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/")
        .context["adminform"]
        .form
    )

    assert dict(form.fields["event_types"].choices)["old.type"] == "old.type (archived)"
    assert form.initial["event_types"] == ["old.type"]


def test_an_endpoint_switched_off_through_the_api_reads_manual_and_filters_so(admin_client, tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/x")
    make_endpoint(tenant=tenant, url="https://hooks.example.com/on")
    webhook_endpoint_update(tenant=tenant, endpoint_id=endpoint.pk, enabled=False)

    change = admin_client.get(f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/")
    filtered = admin_client.get("/admin/delivery/webhookendpoint/?disabled_reason=manual")

    assert "manual" in change.content.decode()
    assert "?disabled_reason=manual" in filtered.content.decode()  # the filter offers it
    assert list(filtered.context["cl"].result_list) == [endpoint]
