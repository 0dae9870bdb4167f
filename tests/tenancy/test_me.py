"""GET /v1/me: the caller and their tenants; no tenant selection needed."""

from tenancy.models import Role
from tests.conftest import make_member


def test_me_lists_every_tenant_with_its_role(alice, charlie):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    client = alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")  # no X-Tenant-ID

    response = client.get("/v1/me")

    assert response.status_code == 200
    assert response.json() == {
        "user": {"id": alice.user.id, "email": "alice@example.com"},
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
