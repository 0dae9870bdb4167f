"""The endpoint gate's rules, without a database: how deep an endpoint's queue may get from
its observed pace, and what it tells the next claim."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from delivery.circuits import Circuit
from delivery.scheduler.gate import (
    TEND_SECONDS,
    Admission,
    ClaimLimits,
    EndpointGate,
    EndpointSlots,
)

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
E = "endpoint"


@dataclass
class HeldSlots:
    """The slots this tick holds of each endpoint (all 4 unless told), and the endpoints
    whose slots other ticks hold."""

    held: dict = field(default_factory=dict)
    blocked: set = field(default_factory=set)
    probe: bool = True

    def usable(self, endpoint_id, *, half_open, now):
        if endpoint_id in self.blocked:
            return 0
        if half_open:
            return int(self.probe)
        return self.held.get(endpoint_id, 4)

    def ceiling(self, endpoint_id, *, half_open, now):
        if endpoint_id in self.blocked or (half_open and not self.probe):
            return 0
        return 1 if half_open else 4

    def unavailable(self, *, now):
        return set(self.blocked)


def gate(slots: HeldSlots | None = None) -> EndpointGate:
    # The defaults: 4 slots, two waves of 4 while the pace is unknown, a 100-row batch,
    # 30 s of waiting (a 45 s lease less a 10 s channel timeout and 5 s).
    return EndpointGate(
        capacity=4,
        threshold=5,
        depth=8,
        slots=slots or HeldSlots(),
        most=100,
        window=30.0,
        share=8,
    )


def finish(g: EndpointGate, seconds: float, times: int = 1) -> None:
    for _ in range(times):
        g.started(E)
        g.finish(E, ok=True, category="", now=NOW, backpressure=False, seconds=seconds)


def test_an_endpoint_of_unknown_pace_queues_two_waves_of_its_slots():
    g = gate()

    assert g.depth_of(E) == 8
    for _ in range(4):
        assert g.admit(E, now=NOW) is Admission.START
        g.started(E)
    for n in range(8):
        assert g.admit(E, now=NOW) is Admission.WAIT
        g.wait(E, n)
    assert g.admit(E, now=NOW) is Admission.RELEASE


def test_a_fast_endpoint_may_queue_a_batch():
    g = gate()
    finish(g, 0.01, times=3)

    # 30 s at 10 ms a wave is thousands of waves: the batch bounds it.
    assert g.depth_of(E) == 100


def test_one_slow_delivery_brings_the_depth_back_down():
    g = gate()
    finish(g, 0.01, times=3)
    finish(g, 10.0)

    # 30 s at 10 s a wave: 3 waves, less one of slack.
    assert g.depth_of(E) == 8


def test_the_pace_is_the_slowest_of_the_latest_deliveries():
    g = gate()
    finish(g, 2.0)  # 30 / 2 = 15 waves, less one: 14 waves of 4
    assert g.depth_of(E) == 56
    finish(g, 0.01, times=8)  # the slow one is no longer among the latest 8

    assert g.depth_of(E) == 100


def test_the_next_claim_takes_what_a_known_endpoint_has_room_for():
    g = gate()
    finish(g, 0.01)
    for _ in range(4):
        g.started(E)
    for n in range(30):
        g.wait(E, n)

    limits = g.claim_limits(now=NOW)

    # No free slot, 70 free places in its queue; it took its full share before, so
    # those 70 need no free worker.
    assert limits.caps == {E: 70}
    assert limits.skip == frozenset()
    assert limits.extra == 0  # not known to have rows left yet
    assert g.claimed(Counter({E: 70}), limits, full=False) == {E}
    assert g.claim_limits(now=NOW).extra == 70


def test_a_claim_looks_only_at_the_endpoints_the_tick_is_busy_with():
    g = gate()
    idle = [f"idle-{n}" for n in range(2_000)]
    for endpoint_id in idle:  # each delivered to once, fast: a pace known, nothing left
        g.started(endpoint_id)
        g.finish(endpoint_id, ok=True, category="", now=NOW, backpressure=False, seconds=0.01)
    g.started(E)
    g.claimed(Counter({"backlogged": 8}), ClaimLimits(), full=False)
    g.started("failing")
    g.finish("failing", ok=False, category="timeout", now=NOW, backpressure=False)

    limits = g.claim_limits(now=NOW)

    # The idle ones take the default share (their next claim of a full share backlogs
    # them); the running, the backlogged and the failing ones their room.
    assert limits.caps == {E: 3 + 8, "backlogged": 4 + 8, "failing": 4 + 8}
    assert not g.in_flight.keys() - {E}
    assert g.claimed(Counter({idle[0]: 8}), limits, full=False) == {idle[0]}
    assert g.claim_limits(now=NOW).caps[idle[0]] == 4 + 100


def test_an_endpoint_without_room_is_skipped_and_a_short_claim_ends_its_backlog():
    g = gate()
    for _ in range(4):
        g.started(E)
    for n in range(8):
        g.wait(E, n)

    limits = g.claim_limits(now=NOW)
    assert limits == ClaimLimits(skip=frozenset({E}), caps={}, extra=0)

    g.backlogged.add(E)
    assert g.claimed(Counter(), ClaimLimits(caps={E: 5}), full=False) == set()
    assert E not in g.backlogged


def test_a_fast_endpoint_wants_a_claim_when_its_queue_is_half_empty():
    g = gate()
    finish(g, 0.01)
    for _ in range(4):
        g.started(E)
    for n in range(60):
        g.wait(E, n)

    assert not g.wants_more(E, now=NOW)  # room for 40 of 100
    for _ in range(10):
        assert g.next_waiting(E, now=NOW) is None  # no free slot: nobody starts
        g.waiting[E].popleft()

    assert g.wants_more(E, now=NOW)  # room for 50


def test_a_slow_endpoint_wants_a_claim_when_a_slot_is_free():
    g = gate()
    for _ in range(4):
        g.started(E)
    assert not g.wants_more(E, now=NOW)

    g.finish(E, ok=True, category="", now=NOW, backpressure=False, seconds=9.0)

    assert g.wants_more(E, now=NOW)


def test_a_waiting_row_comes_out_only_on_a_slot_held_here():
    slots = HeldSlots(held={E: 2})
    g = gate(slots)
    for _ in range(2):
        g.started(E)
    g.wait(E, "row")

    # Two more slots may yet be taken: a new row may start (once its slot is taken) ...
    assert g.admit(E, now=NOW) is Admission.START
    # ... but the waiting one comes out only when a slot held here is free.
    assert g.next_waiting(E, now=NOW) is None
    slots.held[E] = 3
    assert g.next_waiting(E, now=NOW) == "row"


def test_an_endpoint_whose_slots_are_all_elsewhere_releases_its_rows_and_is_skipped():
    g = gate(HeldSlots(blocked={E}))

    assert g.admit(E, now=NOW) is Admission.RELEASE
    assert g.room(E, now=NOW) == 0
    assert g.claim_limits(now=NOW).skip == frozenset({E})


def test_rows_waiting_for_slots_that_were_lost_come_out_to_be_released():
    slots = HeldSlots(held={E: 1})
    g = gate(slots)
    g.started(E)
    g.wait(E, "row")

    assert g.next_waiting(E, now=NOW) is None  # its one slot is busy
    slots.blocked.add(E)  # a renewal found the slot taken by another tick

    assert g.next_waiting(E, now=NOW) == "row"
    assert g.admit(E, now=NOW) is Admission.RELEASE


def test_a_half_open_endpoint_is_probed_only_by_the_holder_of_the_probe_slot():
    half_open = Circuit(consecutive_failures=5, open_until=NOW - timedelta(seconds=1))
    prober, other = gate(HeldSlots(probe=True)), gate(HeldSlots(probe=False))
    for g in (prober, other):
        g.know(E, half_open)

    assert prober.admit(E, now=NOW) is Admission.START
    prober.started(E)
    assert prober.admit(E, now=NOW) is Admission.WAIT
    assert other.admit(E, now=NOW) is Admission.RELEASE


def test_the_queues_together_take_no_more_than_a_few_seconds_of_the_ticks_pace():
    g = gate()
    for endpoint_id in ("a", "b", "c"):
        g.started(endpoint_id)
        g.finish(endpoint_id, ok=True, category="", now=NOW, backpressure=False, seconds=0.01)
    g.backlogged = {"a", "b", "c"}

    # Three fast endpoints want 100 rows each; three deliveries are no pace to speak of,
    # so the queues together take a claim's worth.
    assert g.refills(now=NOW) == 100

    later = NOW + timedelta(seconds=2)
    for _ in range(397):  # 400 deliveries in 2 s: 200 a second, 5 s of it are 1,000 rows
        g.started("a")
        g.finish("a", ok=True, category="", now=later, backpressure=False, seconds=0.01)
    assert g.lookahead_room(now=later) == 1000
    for n in range(990):
        g.wait("b", n)
    assert g.lookahead_room(now=later) == 10
    assert g.refills(now=later) == 10

    # Deliveries older than the pace's window no longer count.
    assert g.lookahead_room(now=later + timedelta(seconds=11)) == 0


class SteppedClock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def elapsed(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return NOW + timedelta(seconds=self.seconds)


def test_a_tick_looks_over_the_slots_it_holds_at_most_every_tend_seconds(monkeypatch):
    config = SimpleNamespace(
        endpoint_concurrency=4,
        lease=timedelta(seconds=45),
        circuit_failures=5,
        waiting_depth=8,
        batch=100,
        wait_window=30.0,
        endpoint_share=8,
        start_cover=timedelta(seconds=10),
    )
    tick = SimpleNamespace(config=config, clock=SteppedClock(), lost=None)
    slots = EndpointSlots(tick)
    slots.holder.held["scope"] = frozenset(range(4))
    slots.endpoint_of["scope"] = E
    looks, freed = [], []
    surplus = slots._surplus
    monkeypatch.setattr(slots, "_surplus", lambda busy: looks.append(1) or surplus(busy))
    monkeypatch.setattr(slots.holder, "release", freed.append)

    # A step every millisecond for a second and a half: one look every TEND_SECONDS.
    for step in range(1500):
        tick.clock.seconds = step / 1000
        slots.tend(queued=[], now=tick.clock.now())

    assert TEND_SECONDS == 0.05
    assert len(looks) == 30
    # The four idle slots were freed once they had been spare for LINGER_SECONDS.
    assert {"scope": [0, 1, 2, 3]} in freed
