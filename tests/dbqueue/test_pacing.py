"""The send budget in the database: slots spaced 1/rate apart from the first free one,
shared by every process, pushed back when the provider asks us to wait."""

from datetime import UTC, datetime, timedelta

import pytest

from dbqueue.pacing import hold_until, next_slot, reserve_slots, take_slot
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
HALF = timedelta(seconds=0.5)


@pytest.mark.django_db
def test_an_idle_budget_hands_out_now_then_slots_one_interval_apart():
    assert next_slot("resend") is None
    assert reserve_slots("resend", rate=2, count=3, now=NOW) == [NOW, NOW + HALF, NOW + 2 * HALF]
    assert reserve_slots("resend", rate=2, count=1, now=NOW) == [NOW + 3 * HALF]
    assert next_slot("resend") == NOW + 4 * HALF


@pytest.mark.django_db
def test_a_budget_idle_since_its_last_slot_starts_again_at_now():
    reserve_slots("resend", rate=2, count=1, now=NOW)
    later = NOW + timedelta(minutes=1)
    assert reserve_slots("resend", rate=2, count=1, now=later) == [later]


@pytest.mark.django_db
def test_budgets_of_different_providers_are_independent():
    reserve_slots("resend", rate=2, count=4, now=NOW)
    assert reserve_slots("other", rate=2, count=1, now=NOW) == [NOW]


@pytest.mark.django_db
def test_hold_until_pushes_the_next_slot_and_never_pulls_it_back():
    reserve_slots("resend", rate=2, count=1, now=NOW)
    hold_until("resend", until=NOW + timedelta(seconds=30), now=NOW)
    assert next_slot("resend") == NOW + timedelta(seconds=30)
    hold_until("resend", until=NOW + timedelta(seconds=5), now=NOW)
    assert next_slot("resend") == NOW + timedelta(seconds=30)
    assert reserve_slots("resend", rate=2, count=1, now=NOW) == [NOW + timedelta(seconds=30)]


@pytest.mark.django_db
def test_reserving_costs_one_statement(django_assert_num_queries):
    reserve_slots("resend", rate=2, count=1, now=NOW)
    with django_assert_num_queries(1):
        reserve_slots("resend", rate=2, count=10, now=NOW)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_processes_reserving_at_once_never_share_a_slot():
    """Eight claimers on their own connections take 25 slots each at the same instant: the
    200 slots are all different and exactly one interval apart, the budget's promise."""

    def claimer() -> list[datetime]:
        mine: list[datetime] = []
        for _ in range(25):
            mine.extend(reserve_slots("resend", rate=2, count=1, now=NOW))
        return mine

    taken = run_together([claimer] * 8)

    slots = sorted(slot for mine in taken for slot in mine)
    assert slots == [NOW + i * HALF for i in range(200)]
    assert next_slot("resend") == NOW + 200 * HALF


@pytest.mark.django_db
def test_take_slot_takes_a_free_slot_and_otherwise_only_says_when():
    assert take_slot("webhook:e", rate=2, now=NOW) is None
    # Not free: nothing is taken, so asking again at the same instant answers the same.
    assert take_slot("webhook:e", rate=2, now=NOW) == NOW + HALF
    assert take_slot("webhook:e", rate=2, now=NOW + HALF / 2) == NOW + HALF
    assert take_slot("webhook:e", rate=2, now=NOW + HALF) is None
    assert next_slot("webhook:e") == NOW + 2 * HALF


@pytest.mark.django_db
def test_taking_a_free_slot_costs_one_statement(django_assert_num_queries):
    take_slot("webhook:e", rate=2, now=NOW)
    with django_assert_num_queries(1):
        assert take_slot("webhook:e", rate=2, now=NOW + HALF) is None
