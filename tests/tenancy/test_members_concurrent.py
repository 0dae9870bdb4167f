"""Two owners changing roles at the same moment on real PostgreSQL connections: the tenant
never ends up without an owner.

The test holds the tenant's owner rows locked while both requests start, waits until both
wait on that lock (seen in pg_stat_activity: each has passed its role check and is about to
decide), then lets them go together."""

from functools import partial

import pytest
from django.db import transaction

from tenancy.models import Membership, Role
from tests.conftest import make_member, requires_postgres
from tests.support.concurrency import Threads, wait_for_lock_waiters

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def _race(tenant, requests) -> list[int]:
    """Run each (actor, method, path, body) at once behind a lock on the owner rows."""

    def send(actor, method, path, body) -> int:
        return getattr(actor.client(), method)(path, body, format="json").status_code

    racers = Threads([partial(send, *request) for request in requests])
    with transaction.atomic():
        list(Membership.objects.select_for_update().filter(tenant=tenant, role=Role.OWNER))
        racers.start()
        wait_for_lock_waiters(len(requests))  # each has passed its role check
    return sorted(racers.join())


def _owners(tenant) -> int:
    return Membership.objects.filter(tenant=tenant, role=Role.OWNER).count()


def test_two_owners_stepping_down_at_once_leave_one_owner(alice):
    bea = make_member(alice.tenant, "bea@example.com", role=Role.OWNER)

    statuses = _race(
        alice.tenant,
        [
            (actor, "patch", f"/v1/members/{actor.user.id}", {"role": "member"})
            for actor in (alice, bea)
        ],
    )

    assert statuses == [200, 409]
    assert _owners(alice.tenant) == 1


def test_two_owners_demoting_each_other_at_once_leave_one_owner(alice):
    bea = make_member(alice.tenant, "bea@example.com", role=Role.OWNER)

    statuses = _race(
        alice.tenant,
        [
            (alice, "patch", f"/v1/members/{bea.user.id}", {"role": "member"}),
            (bea, "patch", f"/v1/members/{alice.user.id}", {"role": "member"}),
        ],
    )

    # The loser is no longer an owner when its turn comes: refused as a member is.
    assert statuses == [200, 403]
    assert _owners(alice.tenant) == 1


def test_two_owners_leaving_at_once_leave_one_owner(alice):
    bea = make_member(alice.tenant, "bea@example.com", role=Role.OWNER)

    statuses = _race(
        alice.tenant,
        [(actor, "delete", f"/v1/members/{actor.user.id}", None) for actor in (alice, bea)],
    )

    assert statuses == [204, 409]
    assert _owners(alice.tenant) == 1
