"""run_tick with real schedules: fire a missed occurrence once, follow local time across
DST, and finish a schedule that ended like a one-shot."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification
from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.http_server import Reply, recording_server

pytestmark = pytest.mark.usefixtures("local_channels")


def test_late_tick_fires_a_missed_occurrence_once_then_skips_to_the_future(tenant):
    now = datetime(2025, 3, 3, 9, 30, tzinfo=UTC)
    missed = now - timedelta(hours=5, minutes=30)
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(
            tenant=tenant, endpoint=endpoint, next_fire_at=missed, rrule="FREQ=HOURLY"
        )

        run_tick(now=now)
        run_tick(now=now)

        assert len(server.received()) == 1
    row.refresh_from_db()
    assert row.next_fire_at == datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
    assert row.occurrence == 2


def test_weekly_local_time_holds_across_the_spring_dst_change(tenant):
    monday_cet = datetime(2025, 3, 24, 8, 0, tzinfo=UTC)  # 09:00 Europe/Berlin (CET)
    row = make_notification(
        tenant=tenant,
        channels=(),
        next_fire_at=monday_cet,
        rrule="FREQ=WEEKLY;BYDAY=MO",
        timezone="Europe/Berlin",
    )

    run_tick(now=monday_cet)

    row.refresh_from_db()
    assert row.next_fire_at == datetime(2025, 3, 31, 7, 0, tzinfo=UTC)  # 09:00 CEST


def test_schedule_that_ended_is_completed_like_a_one_shot(tenant):
    anchor = datetime(2025, 3, 2, 9, 0, tzinfo=UTC)
    row = make_notification(
        tenant=tenant,
        channels=(),
        next_fire_at=anchor + timedelta(days=1),
        recurrence_anchor=anchor,
        rrule="FREQ=DAILY;COUNT=2",
        occurrence=2,
    )

    summary = run_tick(now=anchor + timedelta(days=1))

    assert summary.delivered == 1
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=row.pk) == (
        "completed",
        None,
    )


def test_dead_letter_on_the_last_occurrence_parks_the_row(tenant):
    anchor = datetime(2025, 3, 2, 9, 0, tzinfo=UTC)
    with recording_server(lambda r: Reply(404)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(
            tenant=tenant,
            endpoint=endpoint,
            next_fire_at=anchor,
            rrule="FREQ=DAILY;COUNT=1",
        )

        run_tick(now=anchor)

    row.refresh_from_db()
    assert (row.next_fire_at, row.dead_letter_reason) == (None, "permanent")
