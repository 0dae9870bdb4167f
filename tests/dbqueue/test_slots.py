"""Concurrency slots in the database: a holder takes the free slots of a scope its work needs
for a lease, renews and frees them; a lapsed lease frees a dead holder's slots; holders
taking at once never share a slot."""

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from dbqueue.models import ConcurrencySlot
from dbqueue.slots import SlotHolder
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=45)
SCOPE = "webhook:1"


def holder(capacity: int = 4) -> SlotHolder:
    return SlotHolder(capacity=capacity, lease=LEASE)


def holders_in_database(scope: str = SCOPE) -> dict[int, str]:
    return dict(
        ConcurrencySlot.objects.filter(scope=scope).exclude(holder="").values_list("slot", "holder")
    )


@pytest.mark.django_db
def test_a_holder_takes_every_free_slot_of_a_new_scope():
    first = holder()

    first.take({SCOPE: 4}, now=NOW)

    assert first.slots(SCOPE) == {0, 1, 2, 3}
    assert first.until[SCOPE] == NOW + LEASE
    assert holders_in_database() == dict.fromkeys(range(4), first.name)


@pytest.mark.django_db
def test_a_second_holder_gets_only_what_the_first_does_not_hold():
    first, second = holder(), holder()
    first.take({SCOPE: 4}, now=NOW)

    second.take({SCOPE: 4}, now=NOW)

    assert second.slots(SCOPE) == frozenset()
    assert SCOPE not in second.held
    first.release({SCOPE: range(4)})
    second.take({SCOPE: 4}, now=NOW)
    assert second.slots(SCOPE) == {0, 1, 2, 3}


@pytest.mark.django_db
def test_release_frees_only_the_holders_own_slots():
    first, second = holder(), holder()
    ConcurrencySlot.objects.bulk_create([ConcurrencySlot(scope=SCOPE, slot=n) for n in range(4)])
    ConcurrencySlot.objects.filter(slot__in=[2, 3]).update(holder="someone", held_until_us=10**18)
    first.take({SCOPE: 4}, now=NOW)
    assert first.slots(SCOPE) == {0, 1}

    second.release({SCOPE: range(4)})  # holds nothing: frees nothing
    assert holders_in_database() == {0: first.name, 1: first.name, 2: "someone", 3: "someone"}
    first.release_all()
    assert holders_in_database() == {2: "someone", 3: "someone"}
    assert first.held == {} and first.until == {}


@pytest.mark.django_db
def test_a_lapsed_lease_frees_the_slots_of_a_holder_that_died():
    dead, alive = holder(), holder()
    dead.take({SCOPE: 4}, now=NOW)

    alive.take({SCOPE: 4}, now=NOW + LEASE - timedelta(microseconds=1))
    assert alive.slots(SCOPE) == frozenset()

    alive.take({SCOPE: 4}, now=NOW + LEASE)
    assert alive.slots(SCOPE) == {0, 1, 2, 3}


@pytest.mark.django_db
def test_taking_again_renews_the_lease_and_grows_into_freed_slots():
    first, second = holder(), holder()
    ConcurrencySlot.objects.bulk_create([ConcurrencySlot(scope=SCOPE, slot=n) for n in range(4)])
    ConcurrencySlot.objects.filter(slot=3).update(holder=second.name, held_until_us=10**18)
    first.take({SCOPE: 4}, now=NOW)
    assert first.slots(SCOPE) == {0, 1, 2}

    later = NOW + timedelta(seconds=20)
    ConcurrencySlot.objects.filter(slot=3).update(holder="", held_until_us=0)
    first.take({SCOPE: 4}, now=later)

    assert first.slots(SCOPE) == {0, 1, 2, 3}
    assert first.until[SCOPE] == later + LEASE
    assert first.expiring(now=later + timedelta(seconds=30), within=timedelta(seconds=20)) == [
        SCOPE
    ]
    assert first.expiring(now=later, within=timedelta(seconds=20)) == []


@pytest.mark.django_db
def test_a_holder_takes_only_as_many_slots_as_it_asks_for_and_keeps_what_it_holds():
    first, second = holder(), holder()
    first.take({SCOPE: 1}, now=NOW)
    assert first.slots(SCOPE) == {0}

    second.take({SCOPE: 2}, now=NOW)
    assert second.slots(SCOPE) == {1, 2}

    first.take({SCOPE: 0}, now=NOW)  # asking for fewer than it holds renews them all
    assert first.slots(SCOPE) == {0}
    first.take({SCOPE: 3}, now=NOW)
    assert first.slots(SCOPE) == {0, 3}  # what was free

    first.release({SCOPE: [3]})
    assert holders_in_database() == {0: first.name, 1: second.name, 2: second.name}
    assert first.slots(SCOPE) == {0}


@pytest.mark.django_db
def test_slots_at_or_above_the_capacity_are_not_used():
    ConcurrencySlot.objects.bulk_create([ConcurrencySlot(scope=SCOPE, slot=n) for n in range(8)])
    first = holder(capacity=2)

    first.take({SCOPE: 4}, now=NOW)

    assert first.slots(SCOPE) == {0, 1}


@pytest.mark.django_db
def test_one_statement_takes_the_slots_of_every_scope(django_assert_num_queries):
    scopes = {f"webhook:{n}" for n in range(5)}
    wants = dict.fromkeys(scopes, 4)
    with django_assert_num_queries(3):  # take, create the new scopes' slots, take those
        holder().take(wants, now=NOW)
    holder().release_all()  # holds nothing: no statement

    renewing = holder()
    with django_assert_num_queries(1):
        renewing.take(wants, now=NOW + LEASE)  # the slots exist; the first holder's lapsed
    with django_assert_num_queries(1):
        renewing.take(wants, now=NOW + LEASE)  # renewed
    with django_assert_num_queries(1):
        renewing.release_all()
    assert holders_in_database("webhook:0") == {}


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_holders_taking_at_once_never_share_a_slot():
    """Eight holders on their own connections take the same two scopes at the same instant,
    round after round: each slot goes to one of them, and every slot goes to someone."""
    scopes = {"webhook:a", "webhook:b"}

    for round_ in range(5):
        holders = [holder() for _ in range(8)]
        now = NOW + round_ * LEASE  # the last round's slots have lapsed
        run_together([partial(one.take, dict.fromkeys(scopes, 4), now=now) for one in holders])

        for scope in scopes:
            taken = [(slot, one.name) for one in holders for slot in one.slots(scope)]
            assert sorted(slot for slot, _ in taken) == [0, 1, 2, 3], round_
            assert holders_in_database(scope) == dict(taken)
