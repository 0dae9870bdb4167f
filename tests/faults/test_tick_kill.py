"""A tick killed with SIGKILL while many deliveries are in flight: the rows it held stay
claimed, and the endpoint's slots it held stay taken, until their leases end (a tick started
at once leaves those rows alone and delivers the rest on the slots left), then the next tick
delivers them with the same webhook-id. Nothing is lost, and only rows that were in flight
at the kill are delivered twice."""

import json
import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.db.models import Max, Min
from django.utils import timezone

from dbqueue.models import ConcurrencySlot
from delivery.models import Delivery, Notification
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.faults.workers import wait_past, wait_until
from tests.support.http_server import Reply, recording_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

ROWS = 300
KILL_AFTER = 60  # requests received
HOLD = 0.5  # seconds the server holds each request of the tick that gets killed
# Room for the tick started right after the kill to start and finish before the lease
# ends, on a busy machine too (a Django process may take 15 s to start under load).
LEASE = 30
# One endpoint takes every row here: the fence, not endpoint isolation, is under test.
ENV = {
    "CHANNEL_TIMEOUT_SECONDS": "5",
    "CLAIM_LEASE_SECONDS": str(LEASE),
    "WEBHOOK_ENDPOINT_CONCURRENCY": "64",
}


def test_sigkilled_tick_loses_nothing_and_its_rows_wait_for_their_lease(workers, report):
    tenant = make_tenant()
    holding = True
    with recording_server(lambda request: Reply(200, delay=HOLD if holding else 0)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        started = time.monotonic()
        killed = workers("run_tick", "--limit", str(ROWS), app="fault_kill_a", env=ENV)
        wait_until(lambda: len(server.received()) >= KILL_AFTER, timeout=30)
        killed.kill()
        holding = False
        # Every request the killed tick sent is recorded, or dropped if cut off mid-send.
        wait_until(server.settled, timeout=30)
        before_kill = len(server.received())

        in_flight, leases, dead_slots = what_the_killed_tick_held()
        written_back = Notification.objects.filter(state="completed").count()

        at_once = workers("run_tick", "--limit", str(ROWS), app="fault_kill_b", env=ENV)
        at_once_result = at_once.finish(timeout=60)
        at_once_done = timezone.now()
        after_at_once = len(server.received())
        left_for_lease = set(
            Notification.objects.exclude(state="completed").values_list("pk", flat=True)
        )
        slots_after_at_once = held_slots()

        slots_lapse = max(held_until for *_, held_until in dead_slots)
        wait_past(max(leases["last"], slots_lapse), timeout=LEASE + 10)
        after_lease = workers("run_tick", "--limit", str(ROWS), app="fault_kill_c", env=ENV)
        after_lease_result = after_lease.finish(timeout=60)
        seconds = time.monotonic() - started
        requests = server.received()

    received = Counter(r.headers["webhook-id"] for r in requests)
    redelivered = {webhook_id for webhook_id, count in received.items() if count > 1}
    expected = {f"notification_{row.pk}_1" for row in rows}
    lost = len(expected - received.keys())
    touched_early = [
        r for r in requests[before_kill:after_at_once] if r.headers["webhook-id"] in in_flight
    ]
    report(
        "tick_sigkill",
        rows=ROWS,
        requests_at_kill=before_kill,
        written_back_before_kill=written_back,
        in_flight_at_kill=len(in_flight),
        redelivered=len(redelivered),
        duplicates=sum(received.values()) - len(received),
        lost=lost,
        lease_s=LEASE,
        delivered_before_lease=at_once_result.summary()["delivered"],
        before_lease_tick_seconds=at_once_result.seconds,
        held_rows_touched_before_lease=len(touched_early),
        slots_held_by_the_dead_tick=len(dead_slots),
        delivered_after_lease=after_lease_result.summary()["delivered"],
        seconds=seconds,
    )
    assert killed.process.returncode == -9
    assert at_once_result.returncode == 0, at_once_result.stderr
    assert after_lease_result.returncode == 0, after_lease_result.stderr
    assert in_flight and written_back, "the kill should land mid-tick"
    # The tick started at once delivered everything but the held rows, before their lease.
    assert at_once_done < leases["first"]
    assert {f"notification_{pk}_1" for pk in left_for_lease} == in_flight
    assert touched_early == []
    assert at_once_result.summary()["claimed"] == ROWS - written_back - len(in_flight)
    # The dead tick's slots stayed taken until their lease; the tick started at once used
    # the others and freed them. (Its held rows may outnumber its slots: rows claimed ahead
    # of their start, and rows answered but not yet written back, hold no slot.)
    assert 0 < len(dead_slots) <= int(ENV["WEBHOOK_ENDPOINT_CONCURRENCY"])
    assert slots_after_at_once == dead_slots
    # After the lease, the held rows and only they were claimed again.
    assert after_lease_result.summary()["claimed"] == len(in_flight)
    assert lost == 0
    assert received.keys() == expected
    assert redelivered <= in_flight
    assert len(redelivered) <= len(in_flight)
    assert max(received.values()) <= 2
    # A redelivery repeats the first attempt's webhook-id.
    assert all(ids == {f"notification_{pk}_1"} for pk, ids in webhook_ids(requests).items())
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS


def held_slots() -> set[tuple]:
    """(scope, slot, holder, held until) of every slot held."""
    return {
        (slot.scope, slot.slot, slot.holder, slot.held_until)
        for slot in ConcurrencySlot.objects.exclude(holder="")
    }


def what_the_killed_tick_held() -> tuple[set[str], dict, set[tuple]]:
    """The rows it had claimed and never written back (as webhook-ids), their leases (the
    first and last to end), and the endpoint slots it held."""
    held = Notification.objects.filter(claimed_until__isnull=False)
    in_flight = {f"notification_{pk}_1" for pk in held.values_list("pk", flat=True)}
    leases = held.aggregate(first=Min("claimed_until"), last=Max("claimed_until"))
    return in_flight, leases, held_slots()


def webhook_ids(requests: list) -> dict[str, set[str]]:
    """The webhook-ids each row's requests carried."""
    ids: dict[str, set[str]] = defaultdict(set)
    for request in requests:
        ids[json.loads(request.body)["data"]["notification_id"]].add(request.headers["webhook-id"])
    return ids
