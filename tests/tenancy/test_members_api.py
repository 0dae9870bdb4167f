"""Members through the API: list, change a role, remove, leave; the last owner stays; a
removed member's next request to that tenant is 403 and nothing else of theirs changes."""

import pytest

from tenancy.members import member_set_role
from tenancy.models import ApiToken, Membership, Role
from tests.conftest import make_member
from tests.web.write_endpoints import assert_problem
from web.errors import Forbidden

pytestmark = pytest.mark.django_db


def role_of(actor) -> str | None:
    membership = Membership.objects.filter(tenant=actor.tenant, user=actor.user).first()
    return None if membership is None else membership.role


def test_owners_and_members_list_the_members_newest_first(alice, bob, charlie):
    for actor in (alice, bob):
        response = actor.client().get("/v1/members")

        assert response.status_code == 200
        results = response.json()["results"]
        assert [(row["user_id"], row["email"], row["role"]) for row in results] == [
            (bob.user.id, "bob@example.com", "member"),
            (alice.user.id, "alice@example.com", "owner"),
        ]
        assert all(set(row) == {"user_id", "email", "role", "joined_at"} for row in results)
        assert "charlie" not in response.content.decode()


def test_the_list_pages_with_a_cursor(alice, bob):
    first = alice.client().get("/v1/members?limit=1").json()
    second = alice.client().get(first["next"]).json()

    assert [row["user_id"] for row in first["results"] + second["results"]] == [
        bob.user.id,
        alice.user.id,
    ]


def test_an_owner_changes_a_role(alice, bob):
    response = alice.client().patch(f"/v1/members/{bob.user.id}", {"role": "owner"}, format="json")

    assert response.status_code == 200
    assert response.json()["role"] == "owner"
    assert role_of(bob) == Role.OWNER
    assert bob.client().get("/v1/webhook-endpoints").status_code == 200


def test_a_member_changes_no_role_not_even_their_own(alice, bob):
    for target in (alice, bob):
        response = bob.client().patch(
            f"/v1/members/{target.user.id}", {"role": "owner"}, format="json"
        )

        assert response.status_code == 403
    assert (role_of(alice), role_of(bob)) == (Role.OWNER, Role.MEMBER)


@pytest.mark.parametrize(
    ("body", "field"),
    [({"role": "admin"}, "role"), ({}, "role"), ({"role": "owner", "user_id": 1}, "user_id")],
)
def test_a_bad_role_change_is_400_naming_the_field(alice, bob, body, field):
    response = alice.client().patch(f"/v1/members/{bob.user.id}", body, format="json")

    assert response.status_code == 400
    assert field in assert_problem(response)["errors"]
    assert role_of(bob) == Role.MEMBER


def test_the_last_owner_can_be_neither_demoted_nor_removed(alice, bob):
    demote = alice.client().patch(f"/v1/members/{alice.user.id}", {"role": "member"}, format="json")
    leave = alice.client().delete(f"/v1/members/{alice.user.id}")

    for response in (demote, leave):
        assert response.status_code == 409
        assert assert_problem(response)["type"].endswith("/last-owner")
    assert role_of(alice) == Role.OWNER


def test_with_a_second_owner_the_first_may_step_down(alice, bob):
    alice.client().patch(f"/v1/members/{bob.user.id}", {"role": "owner"}, format="json")

    response = alice.client().patch(
        f"/v1/members/{alice.user.id}", {"role": "member"}, format="json"
    )

    assert response.status_code == 200
    assert (role_of(alice), role_of(bob)) == (Role.MEMBER, Role.OWNER)


def test_a_removed_member_is_403_in_that_tenant_and_keeps_everything_else(alice, bob, charlie):
    make_member(charlie.tenant, "bob@example.com")
    tokens_before = ApiToken.objects.filter(user=bob.user, revoked_at__isnull=True).count()

    response = alice.client().delete(f"/v1/members/{bob.user.id}")

    assert response.status_code == 204
    refused = bob.client(tenant=alice.tenant).get("/v1/projects")
    assert refused.status_code == 403
    assert_problem(refused)
    assert bob.client(tenant=charlie.tenant).get("/v1/projects").status_code == 200
    assert bob.client().get("/v1/me").status_code == 200
    assert ApiToken.objects.filter(user=bob.user, revoked_at__isnull=True).count() == tokens_before


def test_a_member_may_leave(alice, bob):
    response = bob.client().delete(f"/v1/members/{bob.user.id}")

    assert response.status_code == 204
    assert role_of(bob) is None
    assert bob.client(tenant=alice.tenant).get("/v1/members").status_code == 403


def test_a_member_removes_nobody_else(alice, bob):
    carol = make_member(alice.tenant, "carol@example.com")

    for target in (alice, carol):
        assert bob.client().delete(f"/v1/members/{target.user.id}").status_code == 403
    assert (role_of(alice), role_of(carol)) == (Role.OWNER, Role.MEMBER)


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_a_member_of_another_tenant_or_no_one_is_404(alice, charlie, method):
    for path in (str(charlie.user.id), "424242", "x", "\u0661"):
        response = getattr(alice.client(), method)(
            f"/v1/members/{path}", {"role": "member"}, format="json"
        )

        assert response.status_code == 404, path
        assert_problem(response)
    assert role_of(charlie) == Role.OWNER


def test_an_owner_demoted_a_moment_ago_changes_nothing(alice, bob):
    """The role read when the request began is checked again under the lock."""
    Membership.objects.filter(user=bob.user).update(role=Role.OWNER)
    bob_as_owner = Membership.objects.get(user=bob.user)
    Membership.objects.filter(user=bob.user).update(role=Role.MEMBER)  # demoted meanwhile

    with pytest.raises(Forbidden):
        member_set_role(actor=bob_as_owner, user_id=alice.user.id, role=Role.MEMBER)
    assert role_of(alice) == Role.OWNER
