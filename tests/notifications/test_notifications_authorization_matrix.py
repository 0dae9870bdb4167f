"""Every route of the notifications, deliveries and webhook-endpoints APIs against every
caller (anonymous, bad/expired/revoked token, owner, member, outsider) and target."""

import socket
import uuid

import pytest
from django.utils import timezone

from notifications.models import Delivery
from tests.authz import RouteSpec, build_world, check_case, matrix_cases
from tests.notifications.factories import make_endpoint, make_notification


@pytest.fixture(autouse=True)
def public_dns(monkeypatch):
    """Every hostname resolves to one public address; nothing reaches a real resolver."""

    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port or 443))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _notification_id(actor):
    return make_notification(
        tenant=actor.tenant,
        next_fire_at=timezone.now(),
        channels=["email"],
        email_to=["a@example.com"],
    ).id


def _delivery_seed(actor):
    notification_id = _notification_id(actor)
    Delivery.objects.create(
        tenant=actor.tenant,
        notification_id=notification_id,
        occurrence=1,
        channel="email",
        outcome="delivered",
    )
    return notification_id


def _endpoint_id(actor):
    return make_endpoint(tenant=actor.tenant, url="https://hooks.example.com/in").id


NOTIFICATION_BODY = {
    "channels": ["email"],
    "email_to": ["a@example.com"],
    "subject": "S",
    "body": "B",
}
OWNER = ("owner",)

ROUTES = [
    RouteSpec("POST", "/v1/notifications", success=201, body=lambda: NOTIFICATION_BODY),
    RouteSpec("GET", "/v1/notifications", create=_notification_id),
    RouteSpec("GET", "/v1/notifications?state=scheduled", create=_notification_id),
    RouteSpec("GET", "/v1/notifications/{id}", create=_notification_id),
    RouteSpec(
        "PATCH",
        "/v1/notifications/{id}",
        create=_notification_id,
        body=lambda: {"subject": "Changed"},
    ),
    RouteSpec(
        "DELETE", "/v1/notifications/{id}", success=204, roles=OWNER, create=_notification_id
    ),
    RouteSpec("POST", "/v1/notifications/{id}/retry", create=_notification_id),
    RouteSpec("GET", "/v1/notifications/{id}/deliveries", create=_delivery_seed),
    RouteSpec("GET", "/v1/deliveries", create=_delivery_seed),
    RouteSpec("GET", f"/v1/deliveries?notification_id={uuid.uuid4()}", create=_delivery_seed),
    RouteSpec(
        "POST",
        "/v1/webhook-endpoints",
        success=201,
        roles=OWNER,
        body=lambda: {"url": "https://hooks.example.com/new"},
    ),
    RouteSpec("GET", "/v1/webhook-endpoints", roles=OWNER, create=_endpoint_id),
    RouteSpec("GET", "/v1/webhook-endpoints/{id}", roles=OWNER, create=_endpoint_id),
    RouteSpec(
        "PATCH",
        "/v1/webhook-endpoints/{id}",
        roles=OWNER,
        create=_endpoint_id,
        body=lambda: {"enabled": False},
    ),
    RouteSpec(
        "DELETE", "/v1/webhook-endpoints/{id}", success=204, roles=OWNER, create=_endpoint_id
    ),
    RouteSpec("POST", "/v1/webhook-endpoints/{id}/rotate-secret", roles=OWNER, create=_endpoint_id),
]


@pytest.mark.parametrize(("route", "principal", "target"), matrix_cases(ROUTES))
def test_authorization_matrix(route, principal, target, alice, bob, charlie):
    check_case(route, principal, target, build_world(alice, bob, charlie))


def test_outsider_lists_see_nothing_of_tenant_a(alice, charlie):
    notification_id = _delivery_seed(alice)
    endpoint_id = _endpoint_id(alice)
    client = charlie.client()

    for path in (
        "/v1/notifications",
        "/v1/deliveries",
        "/v1/webhook-endpoints",
        f"/v1/deliveries?notification_id={notification_id}",
    ):
        response = client.get(path)

        assert response.status_code == 200
        assert response.json()["results"] == []
        assert str(notification_id) not in response.content.decode()
        assert str(endpoint_id) not in response.content.decode()
