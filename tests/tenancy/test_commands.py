"""create_tenant, create_token and add_member: JSON shapes and clear failures."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tenancy.models import ApiToken, Membership, Tenant
from tenancy.services import token_authenticate

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_tenant_json_is_one_object_with_a_working_token():
    output = run("create_tenant", "Acme", "--owner", "Ann@Example.com", "--json")

    payload = json.loads(output)
    assert set(payload) == {"tenant_id", "user_email", "token"}
    assert payload["user_email"] == "ann@example.com"
    membership = Membership.objects.get(tenant_id=payload["tenant_id"])
    assert (membership.role, membership.user.email) == ("owner", "ann@example.com")
    user, _ = token_authenticate(plaintext=payload["token"], now=timezone.now())
    assert user == membership.user


def test_create_tenant_plain_text_prints_the_token_once():
    output = run("create_tenant", "Acme", "--owner", "ann@example.com")

    token_line = [line for line in output.splitlines() if "tkw_" in line]
    assert len(token_line) == 1
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize(
    "args",
    [("", "--owner", "ann@example.com"), ("   ", "--owner", "a@b.co"), ("Acme", "--owner", "x")],
)
def test_create_tenant_rejects_bad_input(args):
    with pytest.raises(CommandError):
        run("create_tenant", *args)
    assert not Tenant.objects.exists()


def test_create_token_json():
    run("create_tenant", "Acme", "--owner", "ann@example.com")

    payload = json.loads(run("create_token", "ANN@example.com", "--json"))

    assert set(payload) == {"token"}
    assert payload["token"].startswith("tkw_")
    assert ApiToken.objects.count() == 2


def test_create_token_for_an_unknown_user_fails():
    with pytest.raises(CommandError, match="No user"):
        run("create_token", "nobody@example.com", "--json")


def test_add_member_json():
    tenant_id = json.loads(run("create_tenant", "Acme", "--owner", "a@example.com", "--json"))[
        "tenant_id"
    ]

    payload = json.loads(
        run("add_member", tenant_id, "bea@example.com", "--role", "member", "--json")
    )

    assert set(payload) == {"tenant_id", "user_email", "role", "token"}
    assert (payload["tenant_id"], payload["user_email"], payload["role"]) == (
        tenant_id,
        "bea@example.com",
        "member",
    )
    assert Membership.objects.filter(tenant_id=tenant_id).count() == 2


@pytest.mark.parametrize(
    ("tenant", "email", "role", "message"),
    [
        ("not-a-uuid", "bea@example.com", "member", "not a UUID"),
        # A fixed unknown id: every pytest-xdist worker must collect the same test ids.
        ("2b9f6c1e-5d7a-4e8b-9c3f-0a1d2e3f4a5b", "bea@example.com", "member", "No tenant"),
        ("EXISTING", "not-an-email", "member", "not a valid email"),
        ("EXISTING", "bea@example.com", "admin", "invalid choice"),
    ],
)
def test_add_member_rejects_bad_input(tenant, email, role, message):
    existing = json.loads(run("create_tenant", "Acme", "--owner", "a@example.com", "--json"))
    tenant = existing["tenant_id"] if tenant == "EXISTING" else tenant

    with pytest.raises(CommandError, match=message):
        run("add_member", tenant, email, "--role", role)
    assert Membership.objects.count() == 1
