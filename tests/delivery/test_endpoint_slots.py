"""A tick delivers to an endpoint only on the slots it holds of those every tick process
shares: with another tick holding them all it gives the rows back unattempted and leaves
the endpoint alone; once that tick's lease lapses, or it frees them, the rows go out; a
half-open endpoint is probed by the holder of slot 0 alone; a tick frees what it took."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from dbqueue.models import ConcurrencySlot
from dbqueue.slots import SlotHolder
from delivery.models import Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


class Receiver:
    """Records the webhooks sent (no email goes out here)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.senders = Senders(email=self._refuse, webhook=self._record)

    def _record(self, message, *, timeout):
        self.calls.append(message.msg_id)
        return DeliveryResult(ok=True, http_status=200, duration_ms=5)

    def _refuse(self, message, *, timeout):
        raise AssertionError("no email here")


@pytest.fixture
def endpoint(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/hook")
    make_notifications(5, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    return endpoint


def other_tick_holds(endpoint, *, slots=None) -> SlotHolder:
    """Another tick's hold on the endpoint's slots (all of them, or only `slots`)."""
    holder = SlotHolder(
        capacity=settings.WEBHOOK_ENDPOINT_CONCURRENCY,
        lease=timedelta(seconds=settings.CLAIM_LEASE_SECONDS),
    )
    scope = f"webhook:{endpoint.pk}"
    holder.take({scope: settings.WEBHOOK_ENDPOINT_CONCURRENCY}, now=NOW)
    if slots is not None:
        ConcurrencySlot.objects.filter(scope=scope).exclude(slot__in=slots).update(
            holder="", held_until_us=0
        )
    return holder


def test_a_tick_leaves_an_endpoint_whose_slots_another_tick_holds(endpoint):
    receiver = Receiver()
    holder = other_tick_holds(endpoint)

    summary = run_tick(now=NOW, senders=receiver.senders)

    assert receiver.calls == []
    assert summary.delivered == 0
    assert summary.claimed == summary.released > 0
    assert Notification.objects.filter(state="scheduled", claimed_until=None).count() == 5

    holder.release_all()
    summary = run_tick(now=NOW, senders=receiver.senders)
    assert (summary.delivered, len(receiver.calls)) == (5, 5)


def test_the_slots_of_a_tick_that_died_free_themselves_when_their_lease_lapses(endpoint):
    receiver = Receiver()
    other_tick_holds(endpoint)  # and never frees them
    lapsed = NOW + timedelta(seconds=settings.CLAIM_LEASE_SECONDS)

    assert run_tick(now=lapsed - timedelta(seconds=1), senders=receiver.senders).delivered == 0
    assert run_tick(now=lapsed, senders=receiver.senders).delivered == 5


def test_a_tick_uses_the_slots_it_could_take_and_frees_them_when_done(endpoint, settings):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 4
    receiver = Receiver()
    holder = other_tick_holds(endpoint, slots=[0, 1, 2])

    summary = run_tick(now=NOW, senders=receiver.senders)

    assert summary.delivered == 5  # on the one free slot
    held = dict(ConcurrencySlot.objects.exclude(holder="").values_list("slot", "holder"))
    assert held == dict.fromkeys([0, 1, 2], holder.name)


def test_a_half_open_endpoint_is_probed_only_by_the_holder_of_slot_0(endpoint, settings):
    endpoint.consecutive_failures = settings.WEBHOOK_CIRCUIT_FAILURES
    endpoint.circuit_open_until = NOW - timedelta(seconds=1)
    endpoint.circuit_interval_seconds = 60
    endpoint.save()
    receiver = Receiver()
    holder = other_tick_holds(endpoint, slots=[0])

    summary = run_tick(now=NOW, senders=receiver.senders)
    assert receiver.calls == []  # slots 1-3 were free, but slot 0 probes
    assert summary.delivered == 0

    holder.release_all()
    summary = run_tick(now=NOW, senders=receiver.senders)
    assert summary.delivered == 5  # the probe succeeded and closed the circuit
