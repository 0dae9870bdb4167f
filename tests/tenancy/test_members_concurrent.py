"""Two owners changing roles at the same moment on real PostgreSQL connections: the tenant
never ends up without an owner.

The test holds the tenant's owner rows locked while both requests start, waits until both
wait on that lock (seen in pg_stat_activity: each has passed its role check and is about to
decide), then lets them go together."""

import threading
import time

import pytest
from django.db import connection, transaction

from tenancy.models import Membership, Role
from tests.conftest import make_member, requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

WAIT_SECONDS = 30


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction the activity view is a snapshot unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _race(tenant, requests) -> list[int]:
    """Run each (actor, method, path, body) at once behind a lock on the owner rows."""
    statuses: list[int] = []
    guard = threading.Lock()

    def send(actor, method, path, body) -> None:
        try:
            response = getattr(actor.client(), method)(path, body, format="json")
            with guard:
                statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=request) for request in requests]
    with transaction.atomic():
        list(Membership.objects.select_for_update().filter(tenant=tenant, role=Role.OWNER))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while _waiting_on_locks() < len(threads):
            assert time.monotonic() < deadline, "the requests never waited on the owner rows"
            time.sleep(0.01)
    for thread in threads:
        thread.join(timeout=WAIT_SECONDS)
    return sorted(statuses)


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
