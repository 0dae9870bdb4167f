"""Fair claims on both queues: ready rows are taken round-robin across tenants, oldest
first within a tenant, so a quiet tenant is never queued behind a noisy one's backlog."""

import pytest
from django.db import transaction

from tests.dbqueue.fair_queues import QUEUES, seconds_ago
from tests.delivery.factories import make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture(params=sorted(QUEUES))
def queue(request):
    return QUEUES[request.param]


def test_a_quiet_tenants_one_row_is_in_the_first_batch_behind_a_1000_row_backlog(queue):
    backlog = queue.add(make_tenant("noisy"), seconds_ago(*range(3600, 2600, -1)))
    [quiet] = queue.add(make_tenant("quiet"), seconds_ago(0))

    claimed = queue.claim(16)

    assert quiet in claimed
    assert claimed - {quiet} == set(backlog[:15])  # the backlog's oldest, in turn


def test_tenants_take_turns_and_each_tenant_goes_oldest_first(queue):
    # Oldest first regardless of tenant would be a1 a2 a3 b1 b2 c1.
    a1, a3, a2 = queue.add(make_tenant("a"), seconds_ago(60, 40, 50))
    b2, b1 = queue.add(make_tenant("b"), seconds_ago(20, 30))
    [c1] = queue.add(make_tenant("c"), seconds_ago(10))
    fair_order = [a1, b1, c1, a2, b2, a3]

    for size in range(1, len(fair_order) + 1):
        with transaction.atomic():
            assert queue.claim(size) == set(fair_order[:size]), f"batch of {size}"
            transaction.set_rollback(True)


def test_the_next_batch_starts_a_new_round(queue):
    a1, a2, a3 = queue.add(make_tenant("a"), seconds_ago(60, 50, 40))
    b1, b2 = queue.add(make_tenant("b"), seconds_ago(30, 20))

    assert queue.claim(3) == {a1, b1, a2}
    assert queue.claim(3) == {b2, a3}
    assert queue.claim(3) == set()


def test_a_fair_claim_is_one_statement(queue, django_assert_num_queries):
    for name in ("a", "b", "c"):
        queue.add(make_tenant(name), seconds_ago(30, 20, 10))

    with django_assert_num_queries(1):
        claimed = queue.claim(5)

    assert len(claimed) == 5
