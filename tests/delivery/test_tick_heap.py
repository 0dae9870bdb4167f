"""A tick leaves the objects older than it out of the garbage collector's passes while it
runs (a full pass would stop its threads to rescan them all), and hands them back after,
without freezing for good the cycles that are garbage: a loop of ticks keeps none of its
ticks' objects."""

import gc
import weakref
from datetime import UTC, datetime, timedelta

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper

from delivery.scheduler import tick
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_objects_older_than_a_tick_are_frozen_while_it_runs_and_only_then(db):
    frozen_while_sending: list[int] = []

    def webhook(message, *, timeout):
        frozen_while_sending.append(gc.get_freeze_count())
        return DeliveryResult(ok=True, http_status=200)

    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    make_notifications(3, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    before = gc.get_freeze_count()

    summary = run_tick(now=NOW, senders=Senders(email=webhook, webhook=webhook))

    assert summary.delivered == 3
    assert len(frozen_while_sending) == 3
    assert min(frozen_while_sending) > before
    assert gc.get_freeze_count() == before


def _live(kind: type) -> int:
    # By type(): isinstance asks a weak proxy (other tests leave some) for its referent's.
    return sum(issubclass(type(obj), kind) for obj in gc.get_objects())


@pytest.mark.django_db(transaction=True)
def test_a_loop_of_ticks_keeps_none_of_their_objects():
    """Each tick's lanes, threads and database connection (the database thread's, on
    PostgreSQL) are cycles: collected as the tick ends, never frozen by the next tick and
    kept for good (the looping tick grew by a tick's worth of them every tick)."""
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    senders = Senders(email=_delivered, webhook=_delivered)
    gc.collect()  # what earlier tests dropped (a tick that raised holds its objects) is gone
    connections_before = _live(BaseDatabaseWrapper)
    assert _live(tick._Tick) == 0

    for round_ in range(4):
        make_notifications(3, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
        summary = run_tick(now=NOW + timedelta(seconds=round_), senders=senders)

        assert summary.delivered == 3
        assert _live(tick._Tick) == 0
        assert _live(BaseDatabaseWrapper) == connections_before


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_cycle_dropped_between_ticks_is_collected_within_a_few_ticks(db):
    """A cycle dropped between two ticks sits among the older objects that every tick
    freezes: a full pass before one tick in FULL_COLLECTION_EVERY reaches it."""
    cycle = _Cycle()
    gc.collect()  # it survives a full pass, as what lived through a tick's thaw has
    dropped = weakref.ref(cycle)
    del cycle

    for round_ in range(tick.FULL_COLLECTION_EVERY):
        run_tick(now=NOW + timedelta(seconds=round_), senders=Senders(email=_delivered))

    assert dropped() is None


def _delivered(message, *, timeout):
    return DeliveryResult(ok=True, http_status=200)
