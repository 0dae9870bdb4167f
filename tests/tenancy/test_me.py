"""GET /v1/me: the caller and their tenants; no tenant selection needed."""

import pytest

from tenancy.models import Role, Tenant
from tests.conftest import make_member


def test_me_lists_every_tenant_with_its_role(alice, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    client = alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")  # no X-Tenant-ID

    response = client.get("/v1/me")

    assert response.status_code == 200
    assert response.json() == {
        "id": alice.user.id,
        "email": "alice@example.com",
        "name": "",
        "tenants": [
            {"id": str(alice.tenant.id), "name": "Tenant A", "role": "owner"},
            {"id": str(charlie.tenant.id), "name": "Tenant B", "role": "member"},
        ],
    }


# On PostgreSQL the answer's Tickwork-Bookmark reads the primary's WAL position (cached
# for a second), so even a 401 may touch the database.
def test_me_without_a_token_is_401(anonymous, db):
    response = anonymous.get("/v1/me")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_patch_me_sets_the_name_shown_by_get(alice):
    response = alice.client().patch("/v1/me", {"name": "  Alice Liddell "}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "Alice Liddell"
    assert alice.client().get("/v1/me").json()["name"] == "Alice Liddell"
    alice.user.refresh_from_db()
    assert alice.user.first_name == "Alice Liddell"


@pytest.mark.parametrize(
    "body",
    [{}, {"name": 7}, {"name": "x" * 151}, {"name": "A", "email": "x@example.com"}, {"id": 1}],
)
def test_patch_me_refuses_what_it_cannot_take_and_changes_nothing(alice, body):
    response = alice.client().patch("/v1/me", body, format="json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    alice.user.refresh_from_db()
    assert (alice.user.first_name, alice.user.email) == ("", "alice@example.com")


def test_an_owner_renames_the_selected_tenant(alice, bob):
    response = alice.client().patch("/v1/tenant", {"name": "Wonderland"}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "Wonderland"
    assert response.json()["id"] == str(alice.tenant.id)
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Wonderland"
    tenants = bob.client().get("/v1/me").json()["tenants"]
    assert tenants == [{"id": str(alice.tenant.id), "name": "Wonderland", "role": "member"}]


def test_a_member_may_not_rename_the_tenant(alice, bob):
    response = bob.client().patch("/v1/tenant", {"name": "Mine now"}, format="json")

    assert response.status_code == 403
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Tenant A"


def test_renaming_a_tenant_you_are_not_in_is_403_and_changes_nothing(alice, charlie):
    response = charlie.client(tenant=alice.tenant).patch(
        "/v1/tenant", {"name": "Taken"}, format="json"
    )

    assert response.status_code == 403
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Tenant A"


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x" * 201}, {"name": "A", "id": "x"}])
def test_renaming_a_tenant_refuses_bad_names(alice, body):
    response = alice.client().patch("/v1/tenant", body, format="json")

    assert response.status_code == 400
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Tenant A"
