"""The tick's side of RECURRENCE_BUDGET_MS: a schedule whose next occurrence cannot be
computed is dead-lettered as invalid_schedule (kept, logged, never deleted, never left to
stall the tick), and only COUNT and UNTIL finish one. Runs on both engines."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, Notification
from delivery.recurrence import CpuBudget
from delivery.scheduler.plan import Policy
from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.delivery.recurrence_support import MULTIPLIED
from tests.support.http_server import recording_server

pytestmark = pytest.mark.usefixtures("local_channels")

MONDAY = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
# Every 7 days from a Monday is never a Tuesday: dateutil would walk to the year 9999.
NEVER_AGAIN = "FREQ=DAILY;INTERVAL=7;BYDAY=TU"
# The issue's rule: 4.2 s of CPU per row when anchored in 1970 (COUNT is walked from there).
COSTLY_COUNT = "FREQ=MINUTELY;COUNT=10000;BYHOUR=5;BYMINUTE=3"


def _budget_on_a_frozen_clock(policy: Policy) -> CpuBudget:
    return CpuBudget(limit_ms=policy.recurrence_budget_ms, clock=lambda: 0.0)


def _dead_letters(row):
    return list(
        Delivery.objects.filter(
            notification_id=row.pk, outcome=DeliveryOutcome.DEAD_LETTERED
        ).values_list("occurrence", "error_category")
    )


def test_a_schedule_that_cannot_be_computed_is_dead_lettered_not_deleted(tenant, caplog):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(
            tenant=tenant, endpoint=endpoint, next_fire_at=MONDAY, rrule=NEVER_AGAIN
        )

        summary = run_tick(now=MONDAY + timedelta(seconds=5))

        assert len(server.received()) == 1
    row.refresh_from_db()
    assert (row.next_fire_at, row.state, row.dead_letter_reason) == (
        None,
        "dead_lettered",
        "invalid_schedule",
    )
    assert row.claimed_until is None
    assert row.last_error.startswith("invalid_schedule: rrule is too costly")
    assert _dead_letters(row) == [(1, "invalid_schedule")]
    assert (summary.dead_lettered, summary.errors) == (1, 0)
    assert f"row {row.pk}: schedule dead-lettered as invalid_schedule" in caplog.text


def test_a_costly_row_written_before_the_check_does_not_hold_other_tenants(tenant):
    other = make_tenant("Other")
    anchor = datetime(1970, 1, 1, tzinfo=UTC)
    now = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    with recording_server() as server:
        costly = [
            make_notification(
                tenant=tenant,
                endpoint=make_endpoint(tenant=tenant, url=server.url),
                next_fire_at=now,
                rrule=COSTLY_COUNT,
                recurrence_anchor=anchor,
            )
            for _ in range(3)
        ]
        quiet = make_notification(
            tenant=other, endpoint=make_endpoint(tenant=other, url=server.url), next_fire_at=now
        )

        summary = run_tick(now=now)

        assert len(server.received()) == 4
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=quiet.pk) == (
        "completed",
        None,
    )  # a one-shot, finished
    for row in costly:
        row.refresh_from_db()
        assert row.dead_letter_reason == "invalid_schedule"
        assert _dead_letters(row) == [(1, "invalid_schedule")]
    assert summary.dead_lettered == 3


def test_a_multiplied_rule_written_before_the_check_is_dead_lettered_unexpanded(tenant, expanded):
    # 1.3 million candidates a year: the tick refuses it from its text, expanding none.
    rule = MULTIPLIED[0]
    with recording_server() as server:
        row = make_notification(
            tenant=tenant,
            endpoint=make_endpoint(tenant=tenant, url=server.url),
            next_fire_at=MONDAY,
            rrule=rule,
            recurrence_anchor=datetime(1970, 1, 1, tzinfo=UTC),
        )

        summary = run_tick(now=MONDAY)

        assert len(server.received()) == 1
    row.refresh_from_db()
    assert row.dead_letter_reason == "invalid_schedule"
    assert row.last_error.startswith("invalid_schedule: rrule is too costly: one year")
    assert _dead_letters(row) == [(1, "invalid_schedule")]
    assert (summary.dead_lettered, expanded()) == (1, 0)


def test_a_failed_occurrence_of_an_uncomputable_schedule_is_dead_lettered_too(tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in", enabled=False)
    row = make_notification(
        tenant=tenant, endpoint=endpoint, next_fire_at=MONDAY, rrule=NEVER_AGAIN
    )

    run_tick(now=MONDAY)

    row.refresh_from_db()
    assert (row.next_fire_at, row.dead_letter_reason) == (None, "invalid_schedule")
    assert _dead_letters(row) == [(1, "invalid_schedule")]


def test_the_issues_sparse_rule_advances_to_its_real_next_occurrence(tenant, monkeypatch):
    # Accepted, delivered once, then completed before: its next occurrence is 11 weeks away.
    # Admitted by its counted work. Its CPU on an idle machine (14-17 ms) is close to the
    # 20 ms backstop, which a loaded machine's CPU clock can pass: a clock that stands still
    # leaves the answer to the count alone (as the API's test of this rule does).
    monkeypatch.setattr(Policy, "recurrence_budget", property(_budget_on_a_frozen_clock))
    due = datetime(2026, 11, 30, 3, 7, tzinfo=UTC)
    with recording_server() as server:
        row = make_notification(
            tenant=tenant,
            endpoint=make_endpoint(tenant=tenant, url=server.url),
            next_fire_at=due,
            rrule="FREQ=MINUTELY;INTERVAL=11;BYMINUTE=7;BYHOUR=3;BYDAY=MO",
            recurrence_anchor=datetime(2026, 11, 30, 2, 56, tzinfo=UTC),
        )

        run_tick(now=due + timedelta(seconds=2))

        assert len(server.received()) == 1
    row.refresh_from_db()
    assert (row.next_fire_at, row.occurrence) == (datetime(2027, 2, 15, 3, 7, tzinfo=UTC), 2)
    assert _dead_letters(row) == []


def test_count_still_finishes_a_schedule(tenant):
    row = make_notification(
        tenant=tenant, channels=(), next_fire_at=MONDAY, rrule="FREQ=DAILY;COUNT=1"
    )

    run_tick(now=MONDAY)

    assert Notification.objects.values_list("state", "next_fire_at").get(pk=row.pk) == (
        "completed",
        None,
    )
    assert _dead_letters(row) == []
