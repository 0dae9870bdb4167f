"""Which tenant a request acts in, read in the same query as the token: X-Tenant-ID, or the
token's default tenant (the one it was made in), or the caller's sole membership; the
membership's role is that tenant's."""

from django.utils import timezone
from rest_framework.test import APIClient

from projects.models import Project
from tenancy.models import ApiToken, Role
from tests.conftest import make_member, make_owner


def without_tenant_header(actor):
    client = actor.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    return client


def create(client, key="k"):
    return client.post(
        "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": key}
    )


def test_a_sole_membership_is_the_tenant_without_a_header(alice, django_assert_num_queries):
    client = without_tenant_header(alice)
    client.get("/v1/me")  # first use of the token records last_used_at

    # the token with its membership, the rate-limit count, the page
    with django_assert_num_queries(3):
        assert client.get("/v1/projects").status_code == 200
    assert create(client).status_code == 202
    assert Project.objects.get().tenant_id == alice.tenant.id


def test_a_token_made_with_several_memberships_needs_a_header(alice, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    _, plaintext = ApiToken.issue(user=alice.user, name="made with two teams")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    response = client.get("/v1/projects")

    assert response.status_code == 400
    assert "X-Tenant-ID" in response.json()["detail"]


def test_a_token_keeps_its_tenant_when_its_user_joins_another_team(alice, charlie):
    # Alice's token was made while she had one tenant: the day she is invited elsewhere,
    # a script that sends no X-Tenant-ID goes on acting in tenant A.
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    client = without_tenant_header(alice)

    assert create(client).status_code == 202
    assert Project.objects.get().tenant_id == alice.tenant.id
    assert client.get("/v1/webhook-endpoints").status_code == 200  # her role in A: owner
    in_b = alice.client(tenant=charlie.tenant)
    assert create(in_b, key="b").status_code == 202
    assert Project.objects.filter(tenant=charlie.tenant).count() == 1


def test_a_token_whose_default_tenant_was_left_falls_back_to_the_sole_membership(alice, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    alice.user.memberships.filter(tenant=alice.tenant).delete()

    response = without_tenant_header(alice).get("/v1/projects")

    assert response.status_code == 200
    assert create(without_tenant_header(alice)).status_code == 202
    assert Project.objects.get().tenant_id == charlie.tenant.id


def test_a_token_whose_default_tenant_was_left_needs_a_header_among_several(alice, bob, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    other = make_owner("Tenant C", "carol@example.com")
    make_member(other.tenant, "alice@example.com", role=Role.MEMBER)
    alice.user.memberships.filter(tenant=alice.tenant).delete()

    assert without_tenant_header(alice).get("/v1/projects").status_code == 400


def test_the_header_picks_the_tenant_and_its_role(alice, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    in_b = alice.client(tenant=charlie.tenant)

    assert create(in_b).status_code == 202
    assert Project.objects.get().tenant_id == charlie.tenant.id
    # owner of A, only a member of B: B's owner-only routes are closed to her
    assert in_b.get("/v1/webhook-endpoints").status_code == 403
    assert alice.client().get("/v1/webhook-endpoints").status_code == 200


def test_no_membership_is_403_with_or_without_a_header(alice, charlie):
    outsider = make_member(charlie.tenant, "dave@example.com")
    outsider.user.memberships.all().delete()

    assert without_tenant_header(outsider).get("/v1/projects").status_code == 403
    assert outsider.client(tenant=alice.tenant).get("/v1/projects").status_code == 403


def test_a_revoked_token_is_401_before_any_tenant_check(alice):
    ApiToken.objects.filter(user=alice.user).update(revoked_at=timezone.now())

    assert alice.client().get("/v1/projects").status_code == 401
    client = alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}", HTTP_X_TENANT_ID="nope")
    assert client.get("/v1/projects").status_code == 401
