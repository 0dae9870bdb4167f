"""The product's own events are messages, published through the same path as a tenant's
(so subscriptions hold): project.created on create, project.active when provisioning
completes, invitation.accepted and member.joined on an accept, member.removed on a removal."""

import uuid

import pytest
from django.utils import timezone

from dbqueue.clock import Clock
from delivery.models import Notification
from jobs.consumer import jobs_drain
from tenancy.invitations import invitation_issue
from tests.conftest import link_token, make_member
from tests.delivery.factories import make_endpoint
from webhooks.models import Message

pytestmark = pytest.mark.usefixtures("public_dns")

URL = "https://hooks.example.com/in"


def _sent(event_type):
    """{endpoint id: data} of the deliveries of `event_type` messages."""
    rows = Notification.objects.filter(message__event_type=event_type)
    return {row.webhook_endpoint_id: row.message.payload for row in rows}


def test_a_project_is_announced_created_then_active_to_subscribed_endpoints(alice):
    everything = make_endpoint(tenant=alice.tenant, url=URL)
    created_only = make_endpoint(tenant=alice.tenant, url=URL, event_types=["project.created"])
    make_endpoint(tenant=alice.tenant, url=URL, event_types=["member.joined"])

    response = alice.client().post(
        "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "p"}
    )
    project_id = response.json()["id"]

    data = {"project_id": project_id, "tenant_id": str(alice.tenant.id), "name": "P"}
    assert _sent("project.created") == {everything.id: data, created_only.id: data}
    assert set(Notification.objects.values_list("source", flat=True)) == {"system"}
    jobs_drain(clock=Clock(now=timezone.now()), limit=10, max_seconds=60)
    assert _sent("project.active") == {everything.id: data}
    assert Message.objects.filter(tenant=alice.tenant).count() == 2


def test_an_accepted_invitation_is_announced_and_the_new_member_joined(alice, anonymous):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    email = f"{uuid.uuid4().hex[:8]}@example.com"
    issued = invitation_issue(
        tenant=alice.tenant, email=email, role="member", invited_by=alice.user, now=timezone.now()
    )

    response = anonymous.post(
        "/v1/invitations/accept", {"token": link_token(issued.link, email)}, format="json"
    )

    assert response.status_code == 200
    joined = _sent("member.joined")[endpoint.id]
    assert (joined["email"], joined["role"]) == (email, "member")
    accepted = _sent("invitation.accepted")[endpoint.id]
    assert accepted["invitation_id"] == str(issued.invitation.id)


def test_a_removed_member_is_announced(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    member = make_member(alice.tenant, "leaving@example.com")

    response = alice.client().delete(f"/v1/members/{member.user.id}")

    assert response.status_code == 204
    assert _sent("member.removed") == {
        endpoint.id: {
            "tenant_id": str(alice.tenant.id),
            "user_id": member.user.id,
            "email": "leaving@example.com",
        }
    }
