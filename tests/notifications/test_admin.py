"""The support admin: queue filters, delivery log, retries, endpoints without secrets."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification, WebhookEndpoint
from tests.notifications.factories import make_endpoint, make_notification, make_tenant

CHANGELIST = "/admin/delivery/notification/"


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


def _mail(**fields):
    return make_notification(channels=["email"], email_to=["ops@example.com"], **fields)


def _rows(tenant):
    now = timezone.now()
    return {
        "due": _mail(tenant=tenant, next_fire_at=now - timedelta(minutes=1)),
        "backing_off": _mail(tenant=tenant, next_fire_at=now, error_count=1),
        "dead_lettered": _mail(
            tenant=tenant, next_fire_at=None, error_count=3, dead_letter_reason="exhausted"
        ),
        "parked": _mail(tenant=tenant, next_fire_at=None),
        "claimed": _mail(
            tenant=tenant, next_fire_at=now, claimed_until=now + timedelta(seconds=40)
        ),
    }


@pytest.mark.parametrize("state", ["due", "backing_off", "dead_lettered", "parked", "claimed"])
def test_state_filters_select_their_rows(admin_client, tenant, state):
    rows = _rows(tenant)

    response = admin_client.get(CHANGELIST, {"state": state})

    assert response.status_code == 200
    shown = {n.pk for n in response.context["cl"].result_list}
    assert rows[state].pk in shown
    assert rows["parked" if state != "parked" else "claimed"].pk not in shown


def test_change_page_shows_the_delivery_log_and_read_only_claim_columns(admin_client, tenant):
    notification = make_notification(tenant=tenant, next_fire_at=None, claim_token=7)
    Delivery.objects.create(
        tenant=tenant,
        notification_id=notification.id,
        occurrence=3,
        channel="webhook",
        outcome="failed",
        http_status=502,
        error_category="http_5xx",
    )
    Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=99,
        channel="email",
        outcome="delivered",
    )

    response = admin_client.get(f"{CHANGELIST}{notification.id}/change/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "http_5xx" in html and "502" in html
    assert f"/admin/delivery/delivery/?notification_id={notification.id}" in html
    assert 'name="claim_token"' not in html
    assert 'name="claimed_until"' not in html


def test_retry_now_rearms_failing_rows_and_skips_claimed_and_healthy_ones(admin_client, tenant):
    rows = _rows(tenant)
    now = timezone.now()
    claimed_failing = _mail(
        tenant=tenant, next_fire_at=now, error_count=1, claimed_until=now + timedelta(seconds=40)
    )
    ids = [rows["dead_lettered"].pk, claimed_failing.pk, rows["due"].pk]

    response = admin_client.post(
        CHANGELIST, {"action": "retry_now", "_selected_action": ids}, follow=True
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert f"{claimed_failing.pk} (being delivered)" in html
    assert f"{rows['due'].pk} (not failing)" in html
    retried = Notification.objects.get(pk=rows["dead_lettered"].pk)
    assert (retried.state, retried.error_count, retried.dead_letter_reason) == ("scheduled", 0, "")
    assert Notification.objects.get(pk=claimed_failing.pk).claim_token == 0
    healthy = Notification.objects.get(pk=rows["due"].pk)
    assert (healthy.claim_token, healthy.next_fire_at) == (0, rows["due"].next_fire_at)


def test_unpark_only_touches_parked_rows(admin_client, tenant):
    rows = _rows(tenant)
    ids = [rows["parked"].pk, rows["backing_off"].pk]

    response = admin_client.post(
        CHANGELIST, {"action": "unpark", "_selected_action": ids}, follow=True
    )

    assert "not dead-lettered or parked" in response.content.decode()
    assert Notification.objects.get(pk=rows["parked"].pk).state == "scheduled"
    assert Notification.objects.get(pk=rows["backing_off"].pk).error_count == 1


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


@pytest.mark.parametrize(
    "query", ["", "outcome=dead_lettered", "channel=webhook", "error_category=timeout"]
)
def test_delivery_log_is_a_read_only_filterable_list(admin_client, tenant, query):
    kept = Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="webhook",
        outcome="dead_lettered",
        error_category="timeout",
    )

    response = admin_client.get(f"/admin/delivery/delivery/?{query}")

    assert response.status_code == 200
    assert [d.pk for d in response.context["cl"].result_list] == [kept.pk]
    assert admin_client.get("/admin/delivery/delivery/add/").status_code == 403
    assert admin_client.post(f"/admin/delivery/delivery/{kept.pk}/delete/").status_code == 403


def test_delivery_log_filters_by_notification(admin_client, tenant):
    wanted = Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="email",
        outcome="delivered",
    )
    Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=1,
        channel="email",
        outcome="delivered",
    )

    response = admin_client.get(
        "/admin/delivery/delivery/", {"notification_id": str(wanted.notification_id)}
    )

    assert [d.pk for d in response.context["cl"].result_list] == [wanted.pk]


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


def test_delivery_rows_link_to_their_notification_while_it_exists(admin_client, tenant):
    notification = make_notification(tenant=tenant, next_fire_at=None, subject="Weekly report")
    gone = uuid.uuid4()
    for notification_id in (notification.id, gone):
        Delivery.objects.create(
            tenant=tenant,
            notification_id=notification_id,
            occurrence=1,
            channel="email",
            outcome="delivered",
        )

    html = admin_client.get("/admin/delivery/delivery/").content.decode()

    assert f'<a href="{CHANGELIST}{notification.id}/change/">Weekly report</a>' in html
    assert f"(deleted) {gone}" in html


def test_every_admin_page_writes_dates_one_way(admin_client, tenant):
    at = datetime(2026, 3, 2, 21, 5, 7, tzinfo=UTC)
    notification = make_notification(tenant=tenant, next_fire_at=at)
    Delivery.objects.create(
        tenant=tenant,
        notification_id=notification.id,
        occurrence=1,
        channel="webhook",
        outcome="delivered",
        attempted_at=at,
    )

    pages = [
        admin_client.get(f"{CHANGELIST}{notification.id}/change/").content.decode(),
        admin_client.get("/admin/delivery/delivery/").content.decode(),
    ]

    for html in pages:
        assert "2026-03-02 21:05:07 UTC" in html
        assert "p.m." not in html and "March 2, 2026" not in html


def test_a_message_s_page_shows_its_deliveries_per_endpoint(admin_client):
    from tests.notifications.factories import make_endpoint, make_tenant
    from webhooks.messages import publish_message

    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    message = publish_message(tenant=tenant, event_type="project.active", payload={"k": 1})

    listed = admin_client.get("/admin/webhooks/message/")
    page = admin_client.get(f"/admin/webhooks/message/{message.id}/change/")
    types = admin_client.get("/admin/webhooks/eventtype/")

    assert listed.status_code == page.status_code == types.status_code == 200
    assert "project.active" in listed.content.decode()
    assert str(endpoint.id) in page.content.decode()
    assert "pending" in page.content.decode()
