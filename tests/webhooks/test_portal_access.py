"""What a portal session's token reaches: its application's endpoints and messages (another
application's, or the tenant's own, are 404), event types read only, every other route 403
`portal-scope`, and each operation 403 `capability-required` without its capability."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification, WebhookEndpoint
from tests.delivery.factories import make_notification
from tests.webhooks.portal_support import (
    URL,
    application_endpoint,
    application_message,
    make_application,
    portal_client,
    portal_token,
)
from webhooks.event_types import event_type_create

pytestmark = pytest.mark.usefixtures("public_dns")

PROBLEM = "https://tickwork.dev/problems/"


@pytest.fixture
def acme(alice):
    return make_application(alice.tenant, "acme")


@pytest.fixture
def globex(alice):
    return make_application(alice.tenant, "globex")


def _portal(application, capabilities=None):
    return portal_client(portal_token(application, capabilities))


def _problem(response, status, kind):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["type"] == PROBLEM + kind


def test_lists_show_only_the_session_s_application(alice, acme, globex):
    ours = application_endpoint(acme)
    theirs = application_endpoint(globex)
    tenants_own = application_endpoint(None, alice.tenant)
    our_message = application_message(acme, [ours])
    their_message = application_message(globex, [theirs])
    tenants_message = application_message(None, [tenants_own], tenant=alice.tenant)
    portal = _portal(acme)

    endpoints = portal.get("/v1/webhook-endpoints")
    messages = portal.get("/v1/messages")

    assert [row["id"] for row in endpoints.json()["results"]] == [str(ours.id)]
    assert [row["id"] for row in messages.json()["results"]] == [str(our_message.id)]
    for foreign in (theirs, tenants_own, their_message, tenants_message):
        assert str(foreign.id) not in endpoints.content.decode() + messages.content.decode()
    owner_view = alice.client().get("/v1/webhook-endpoints").json()["results"]
    assert len(owner_view) == 3  # the owner's console spans every application


def test_another_application_s_or_the_tenant_s_own_objects_are_404(alice, acme, globex):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    portal = _portal(acme)
    for application in (globex, None):
        endpoint = application_endpoint(application, alice.tenant)
        message = application_message(application, [endpoint], tenant=alice.tenant)
        since = (timezone.now() - timedelta(hours=1)).isoformat()
        calls = [
            ("get", f"/v1/webhook-endpoints/{endpoint.id}", None),
            ("patch", f"/v1/webhook-endpoints/{endpoint.id}", {"enabled": False}),
            ("get", f"/v1/webhook-endpoints/{endpoint.id}/secret", None),
            ("post", f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret", None),
            ("post", f"/v1/webhook-endpoints/{endpoint.id}/recover", {"since": since}),
            ("delete", f"/v1/webhook-endpoints/{endpoint.id}", None),
            ("get", f"/v1/messages/{message.id}", None),
            ("get", f"/v1/messages/{message.id}/attempts", None),
            ("post", f"/v1/messages/{message.id}/endpoints/{endpoint.id}/resend", None),
        ]
        for method, path, body in calls:
            response = getattr(portal, method)(path, body, format="json")
            _problem(response, 404, "not-found")
            assert str(endpoint.id) not in response.content.decode()
        stored = WebhookEndpoint.objects.get(pk=endpoint.pk)
        assert stored.enabled and stored.secret == endpoint.secret
    assert not Notification.objects.exists()


def test_resending_the_application_s_message_to_another_application_s_endpoint_is_404(
    alice, acme, globex
):
    ours = application_endpoint(acme)
    theirs = application_endpoint(globex)
    message = application_message(acme, [ours, theirs])

    response = _portal(acme).post(f"/v1/messages/{message.id}/endpoints/{theirs.id}/resend")

    _problem(response, 404, "not-found")
    assert not Notification.objects.exists()


def test_a_full_session_manages_its_application_s_endpoints(alice, acme):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    portal = _portal(acme)

    created = portal.post(
        "/v1/webhook-endpoints", {"url": URL, "event_types": ["invoice.paid"]}, format="json"
    )
    assert created.status_code == 201, created.content
    endpoint = WebhookEndpoint.objects.get(pk=created.json()["id"])
    assert endpoint.application_id == acme.id
    assert created.json()["secret"] == endpoint.secret
    path = f"/v1/webhook-endpoints/{endpoint.id}"

    assert portal.patch(path, {"disabled": True}, format="json").json()["disabled"] is True
    assert portal.patch(path, {"disabled": False}, format="json").json()["disabled"] is False
    assert portal.get(f"{path}/secret").json() == {"secret": endpoint.secret}
    rotated = portal.post(f"{path}/rotate-secret").json()["secret"]
    assert rotated != endpoint.secret
    assert portal.get(f"{path}/secret").json() == {"secret": rotated}
    types = portal.get("/v1/event-types").json()["results"]
    assert "invoice.paid" in [row["name"] for row in types]
    assert portal.delete(path).status_code == 204
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


def test_a_session_resends_and_recovers_its_application_s_deliveries(alice, acme):
    endpoint = application_endpoint(acme)
    message = application_message(acme, [endpoint])
    notification = make_notification(
        tenant=alice.tenant,
        channels=["webhook"],
        webhook_endpoint=endpoint,
        next_fire_at=None,
        error_count=3,
        dead_letter_reason="exhausted",
    )
    Notification.objects.filter(pk=notification.pk).update(message=message)
    Delivery.objects.create(
        tenant=alice.tenant,
        notification_id=notification.id,
        occurrence=1,
        channel="webhook",
        outcome="failed",
        http_status=500,
    )
    portal = _portal(acme)

    resent = portal.post(f"/v1/messages/{message.id}/endpoints/{endpoint.id}/resend")
    attempts = portal.get(f"/v1/messages/{message.id}/attempts")
    reached = portal.get(f"/v1/messages/{message.id}/endpoints")
    recovered = portal.post(
        f"/v1/webhook-endpoints/{endpoint.id}/recover",
        {"since": (timezone.now() - timedelta(days=1)).isoformat()},
        format="json",
    )

    assert resent.status_code == 202, resent.content
    assert attempts.status_code == reached.status_code == 200
    assert [row["http_status"] for row in attempts.json()["results"]] == [500]
    assert str(endpoint.id) in reached.content.decode()
    assert recovered.status_code == 202, recovered.content


@pytest.mark.parametrize(
    ("missing", "method", "path", "body"),
    [
        ("manage_endpoints", "post", "/v1/webhook-endpoints", {"url": URL}),
        ("manage_endpoints", "patch", "/v1/webhook-endpoints/{endpoint}", {"enabled": False}),
        ("manage_endpoints", "delete", "/v1/webhook-endpoints/{endpoint}", None),
        ("view_secret", "get", "/v1/webhook-endpoints/{endpoint}/secret", None),
        ("rotate_secret", "post", "/v1/webhook-endpoints/{endpoint}/rotate-secret", None),
        ("resend", "post", "/v1/messages/{message}/endpoints/{endpoint}/resend", None),
        ("resend", "post", "/v1/webhook-endpoints/{endpoint}/recover", {"since": "now"}),
    ],
)
def test_each_operation_needs_its_capability(acme, missing, method, path, body):
    endpoint = application_endpoint(acme)
    message = application_message(acme, [endpoint])
    others = [
        c for c in ("manage_endpoints", "view_secret", "rotate_secret", "resend") if c != missing
    ]
    portal = _portal(acme, others)
    if body == {"since": "now"}:
        body = {"since": (timezone.now() - timedelta(days=1)).isoformat()}

    response = getattr(portal, method)(
        path.format(endpoint=endpoint.id, message=message.id), body, format="json"
    )

    _problem(response, 403, "capability-required")
    assert missing in response.json()["detail"]
    stored = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert stored.enabled and stored.secret == endpoint.secret
    assert WebhookEndpoint.objects.count() == 1
    assert not Notification.objects.exists()


def test_without_view_secret_create_and_rotate_answer_without_the_secret(acme):
    portal = _portal(acme, ["manage_endpoints", "rotate_secret"])

    created = portal.post("/v1/webhook-endpoints", {"url": URL}, format="json")
    rotated = portal.post(f"/v1/webhook-endpoints/{created.json()['id']}/rotate-secret")

    assert created.status_code == 201 and "secret" not in created.json()
    assert rotated.status_code == 200 and "secret" not in rotated.json()


def test_a_read_only_session_reads(alice, acme):
    endpoint = application_endpoint(acme)
    message = application_message(acme, [endpoint])
    portal = _portal(acme, [])

    for path in (
        "/v1/webhook-endpoints",
        f"/v1/webhook-endpoints/{endpoint.id}",
        "/v1/event-types",
        "/v1/messages?event_type=invoice.paid",
        f"/v1/messages/{message.id}",
        f"/v1/messages/{message.id}/attempts",
    ):
        assert portal.get(path).status_code == 200, path


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/notifications"),
        ("post", "/v1/notifications"),
        ("get", "/v1/projects"),
        ("get", "/v1/tokens"),
        ("post", "/v1/tokens"),
        ("get", "/v1/me"),
        ("get", "/v1/members"),
        ("get", "/v1/deliveries"),
        ("get", "/v1/usage"),
        ("post", "/v1/applications/acme/portal-sessions"),
        ("post", "/v1/messages"),
        ("post", "/v1/event-types"),
        ("delete", "/v1/portal-sessions/{session}"),
        ("post", "/v1/signin"),
    ],
)
@pytest.mark.usefixtures("signup_on")
def test_routes_outside_the_portal_are_403_portal_scope(alice, acme, method, path):
    session_id = uuid.uuid4()

    response = getattr(_portal(acme), method)(path.format(session=session_id), {}, format="json")

    _problem(response, 403, "portal-scope")


def test_a_session_ignores_x_tenant_id_and_stays_in_its_tenant(alice, charlie, acme):
    theirs = application_endpoint(None, charlie.tenant)
    portal = _portal(acme)
    portal.credentials(
        HTTP_AUTHORIZATION=portal._credentials["HTTP_AUTHORIZATION"],
        HTTP_X_TENANT_ID=str(charlie.tenant.id),
    )

    response = portal.get("/v1/webhook-endpoints")

    assert response.status_code == 200
    assert str(theirs.id) not in response.content.decode()
