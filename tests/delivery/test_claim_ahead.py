"""The row lane claims ahead of its workers: once the rows waiting for a worker fall to half
of what the tick delivers in AHEAD_SECONDS, the next claim runs while the workers are still
busy, instead of after they ran out. Without a database: the lane's claims alone."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from dbqueue.claims import Claimed
from delivery.scheduler.mail import TenantPace
from delivery.scheduler.paced import PacedRows
from delivery.scheduler.rowlane import AHEAD_SECONDS, RowClaims
from tests.delivery.test_gate import gate

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self, *, moves: bool) -> None:
        self.moves = moves

    def now(self) -> datetime:
        return NOW + timedelta(seconds=1)

    def elapsed(self) -> float:
        return 1.0


def claims(*, delivered_last_second: int, moves: bool = True) -> RowClaims:
    """The claims of a lane with 16 workers and 100-row batches, whose tick delivered that
    many rows in the last second."""
    endpoint_gate = gate()
    for n in range(delivered_last_second):
        endpoint_gate.started("endpoint")
        endpoint_gate.finish(
            "endpoint",
            ok=True,
            category="",
            now=NOW + timedelta(seconds=n / delivered_last_second),
            backpressure=False,
            seconds=0.01,
        )
    tick = SimpleNamespace(
        config=SimpleNamespace(concurrency=16, batch=100, endpoint_share=8),
        clock=Clock(moves=moves),
        may_claim=lambda: True,
        claim_room=lambda wanted: wanted,
    )
    paced = PacedRows(window=30.0, pace=TenantPace(), endpoints={})
    return RowClaims(tick, gate=endpoint_gate, paced=paced, claim=not_here, leave=None)


def not_here(**claim_args: object) -> Claimed:
    raise AssertionError("these tests ask what to claim; they never claim")


def test_a_fast_tick_claims_a_batch_ahead_while_its_workers_are_all_busy():
    lane = claims(delivered_last_second=1_000)  # 250 rows in AHEAD_SECONDS: a batch

    assert AHEAD_SECONDS * 1_000 >= 100
    assert lane.wanted(free=0, running=16, queued=49)
    assert lane.request(free=0, queued=20, known=frozenset()).wanted == 100 - 20
    assert not lane.wanted(free=0, running=16, queued=50)  # half a batch still waits


def test_a_slow_tick_claims_ahead_only_what_it_delivers_in_a_moment():
    lane = claims(delivered_last_second=8)  # 2 rows in AHEAD_SECONDS

    assert lane.wanted(free=0, running=16, queued=0)
    assert lane.request(free=0, queued=0, known=frozenset()).wanted == 2
    assert not lane.wanted(free=0, running=16, queued=1)


def test_on_a_clock_that_never_moves_nothing_is_claimed_ahead():
    lane = claims(delivered_last_second=1_000, moves=False)

    assert not lane.wanted(free=0, running=16, queued=0)
    assert lane.request(free=4, queued=0, known=frozenset()).wanted == 4
