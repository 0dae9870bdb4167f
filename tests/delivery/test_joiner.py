"""The joiner, without a database: a row whose channels went out in pieces (its webhook in a
row worker, its email in a batch) is planned once, when the last piece is back; a piece that
broke costs the row its write-back; a row with nothing to send is planned at once."""

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from delivery.circuits import Signal
from delivery.models import Notification
from delivery.scheduler.context import TickConfig, TickSummary
from delivery.scheduler.deliver import Deferral
from delivery.scheduler.plan import Bucket, RowPlan
from delivery.scheduler.writeback import Joiner, WriteBackBuffer
from delivery.states import Move
from delivery.transports.base import DeliveryResult

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SENT = NOW + timedelta(seconds=3)
OK = DeliveryResult(ok=True, http_status=200, duration_ms=5)


class FixedClock:
    def now(self) -> datetime:
        return NOW


@dataclass
class FakeTick:
    config: TickConfig
    clock: FixedClock = field(default_factory=FixedClock)
    summary: TickSummary = field(default_factory=TickSummary)
    lost: None = None


@pytest.fixture
def tick() -> FakeTick:
    config = TickConfig.from_settings(max_rows=None, time_budget=None, concurrency=None)
    return FakeTick(config=config)


@pytest.fixture
def buffer(tick) -> WriteBackBuffer:
    return WriteBackBuffer(tick, write=lambda plans, **_: [])


def row(*channels: str) -> Notification:
    return Notification(
        tenant_id=uuid.uuid4(),
        channels=list(channels),
        webhook_endpoint_id=uuid.uuid4() if "webhook" in channels else None,
        next_fire_at=NOW,
        due_at=NOW,
        claim_token=7,
    )


def test_a_row_out_in_two_pieces_is_planned_once_both_are_back(tick, buffer):
    both = row("webhook", "email")
    signal = (both.webhook_endpoint_id, Signal.ALIVE)
    joiner = Joiner(tick, buffer)
    joiner.expect(both, pieces=2, at=NOW, deferred={})

    joiner.settle(both, results={"webhook": OK}, signal=signal)
    assert buffer.plans == []
    joiner.settle(both, results={"email": OK}, sent_at=SENT)

    [plan] = buffer.plans
    assert isinstance(plan, RowPlan)
    assert (plan.pk, plan.token, plan.bucket) == (both.pk, 7, Bucket.DELIVERED)
    assert plan.endpoint_signal == signal
    # Attempted when its webhook went, in the row's channel order.
    assert [(log.channel, log.attempted_at) for log in plan.logs] == [
        ("webhook", NOW),
        ("email", NOW),
    ]


def test_a_row_out_in_one_batch_was_attempted_when_the_batch_went(tick, buffer):
    email = row("email")
    joiner = Joiner(tick, buffer)
    joiner.expect(email, pieces=1, at=NOW, deferred={})

    joiner.settle(email, results={"email": OK}, sent_at=SENT)

    [plan] = buffer.plans
    assert [log.attempted_at for log in plan.logs] == [SENT]


def test_a_broken_piece_costs_the_row_its_write_back(tick, buffer):
    both = row("webhook", "email")
    joiner = Joiner(tick, buffer)
    joiner.expect(both, pieces=2, at=NOW, deferred={})

    joiner.broke(both, RuntimeError("boom"))
    joiner.settle(both, results={"email": OK}, sent_at=SENT)

    assert buffer.plans == []
    assert tick.summary.errors == 1
    assert joiner.joins == {}


def test_a_row_with_every_channel_deferred_is_planned_at_once(tick, buffer):
    webhook = row("webhook")
    until = NOW + timedelta(minutes=1)
    joiner = Joiner(tick, buffer)

    joiner.expect(webhook, pieces=0, at=NOW, deferred={"webhook": Deferral(until, "circuit_open")})

    [plan] = buffer.plans
    assert plan.bucket is Bucket.DEFERRED
    assert plan.changes["next_fire_at"] == until


def test_a_plan_is_not_edited_once_built(tick, buffer):
    email = row("email")
    joiner = Joiner(tick, buffer)
    joiner.expect(email, pieces=1, at=NOW, deferred={})
    joiner.settle(email, results={"email": OK})

    with pytest.raises(AttributeError):
        buffer.plans[0].endpoint_signal = None


def test_rows_given_back_are_written_before_the_next_claim_can_miss_them(tick):
    written: list[list[RowPlan]] = []
    buffer = WriteBackBuffer(tick, write=lambda plans, **_: written.append(plans) or [])
    delivered = RowPlan(pk=1, token=7, move=Move.COMPLETE, bucket=Bucket.DELIVERED)
    released = RowPlan(pk=2, token=7, move=Move.RELEASE, bucket=Bucket.RELEASED)

    buffer.add(delivered)
    buffer.flush_releases()
    assert written == []  # a finished row waits for its batch

    buffer.add(released)
    buffer.flush_releases()
    assert written == [[delivered, released]]
    assert (tick.summary.delivered, tick.summary.released) == (1, 1)
