"""Pinned statement counts: a tick's SQL does not grow with the rows it delivers."""

from datetime import UTC, datetime

import pytest

from delivery.models import Delivery, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def delivered(message, *, timeout):
    return DeliveryResult(ok=True, http_status=200)


SENDERS = Senders(email=delivered, webhook=delivered)

# claim, endpoints, the endpoint's shared slots taken, then one write-back batch: SAVEPOINT
# (the test's transaction), fenced DELETE or UPDATE, delivery log INSERT, RELEASE; the slots
# freed; last, the one upsert of the worker totals.
STATEMENTS_PER_TICK = 9
# An endpoint no tick has sent to yet: its slots are created and taken again (two more);
# and the process's first look whether any plan sets deliveries_per_second (then cached).
STATEMENTS_PER_FIRST_TICK = STATEMENTS_PER_TICK + 3


@pytest.mark.parametrize("rows", [3, 30])
@pytest.mark.parametrize("rrule", ["", "FREQ=DAILY"], ids=["one_shot", "recurring"])
def test_tick_statements_stay_constant_as_rows_grow(
    db, settings, django_assert_num_queries, rows, rrule
):
    # One endpoint takes every row here: let it have them all in flight at once.
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = rows + 1
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    make_notifications(rows, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule=rrule)

    with django_assert_num_queries(STATEMENTS_PER_FIRST_TICK):
        # One slot more than rows: the first claim comes up short, so the tick knows the
        # queue is drained without a second claim.
        summary = run_tick(now=NOW, concurrency=rows + 1, senders=SENDERS)

    assert summary.delivered == rows
    assert Delivery.objects.count() == rows
    remaining = Notification.objects.filter(occurrence=2, claimed_until=None).count()
    assert remaining == (rows if rrule else 0)


@pytest.mark.parametrize("rows", [3, 30])
def test_a_tick_to_an_endpoint_sent_to_before_takes_its_slots_in_one_statement(
    db, settings, django_assert_num_queries, rows
):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = rows + 1
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    make_notifications(1, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    run_tick(now=NOW, concurrency=rows + 1, senders=SENDERS)
    make_notifications(rows, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    with django_assert_num_queries(STATEMENTS_PER_TICK):
        summary = run_tick(now=NOW, concurrency=rows + 1, senders=SENDERS)

    assert summary.delivered == rows
