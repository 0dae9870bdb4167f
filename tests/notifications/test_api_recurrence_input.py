"""The API's side of §3/§4/§11 for schedules: costly rules, and rules whose BY lists
multiply inside a period, refused (400 rrule-too-costly) at create and PATCH, non-ASCII
digits in an RRULE a clear 400, fire_at without offset read as wall-clock time in the
notification's zone and kept in whole seconds, and rules naming the time of day firing at
second 0."""

import uuid
from datetime import UTC, datetime

import pytest
from django.conf import settings

import delivery.validation
import notifications.services
from delivery.models import Notification
from delivery.recurrence import CpuBudget, next_occurrence
from tests.delivery.factories import make_notification
from tests.delivery.recurrence_support import MULTIPLIED

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}
# The issue's rule: COUNT is walked from fire_at, one day per occurrence, 10,000 of them.
COSTLY = {
    "rrule": "FREQ=MINUTELY;COUNT=10000;BYHOUR=5;BYMINUTE=3",
    "fire_at": "1970-01-01T00:00:00Z",
}


def _create(actor, **overrides):
    return actor.client().post(
        "/v1/notifications",
        {**EMAIL, **overrides},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )


def _assert_too_costly(response):
    assert response.status_code == 400
    body = response.json()
    assert body["type"].endswith("/rrule-too-costly")
    assert "RECURRENCE_BUDGET_MS (20 ms of CPU)" in body["detail"]
    assert body["errors"]["rrule"] == [body["detail"]]


def test_a_costly_rule_is_refused_at_create(alice):
    _assert_too_costly(_create(alice, **COSTLY))
    assert not Notification.objects.exists()


@pytest.mark.parametrize("rule", MULTIPLIED)
def test_a_rule_whose_periods_multiply_is_refused_at_create_and_patch(alice, rule):
    # The issue's shapes: accepted before, 5-12 s of CPU per create or PATCH.
    shape = {"rrule": rule, "fire_at": "1970-01-01T00:00:00Z"}
    created = _create(alice, rrule="FREQ=DAILY", fire_at="2031-05-01T09:00:00Z").json()

    refused_create = _create(alice, **shape)
    refused_patch = alice.client().patch(f"/v1/notifications/{created['id']}", shape, format="json")

    for response in (refused_create, refused_patch):
        assert response.status_code == 400
        body = response.json()
        assert body["type"].endswith("/rrule-too-costly")
        assert body["detail"].startswith("rrule is too costly: one ")
    assert Notification.objects.count() == 1
    row = Notification.objects.get(pk=created["id"])
    assert (row.rrule, row.next_fire_at) == ("FREQ=DAILY", datetime(2031, 5, 1, 9, tzinfo=UTC))


def test_a_costly_rule_is_refused_at_patch_and_the_row_is_untouched(alice):
    created = _create(alice, rrule="FREQ=DAILY", fire_at="2031-05-01T09:00:00Z").json()

    response = alice.client().patch(f"/v1/notifications/{created['id']}", COSTLY, format="json")

    _assert_too_costly(response)
    row = Notification.objects.get(pk=created["id"])
    assert (row.rrule, row.next_fire_at) == ("FREQ=DAILY", datetime(2031, 5, 1, 9, tzinfo=UTC))


def test_the_budget_is_the_setting(alice, settings):
    # Over 20 ms of counted work, yet cheap to walk for real (COSTLY's takes seconds).
    weekly = {"rrule": "FREQ=WEEKLY;COUNT=5000;BYDAY=MO,TU", "fire_at": "1970-01-01T00:00:00Z"}
    _assert_too_costly(_create(alice, **weekly))

    settings.RECURRENCE_BUDGET_MS = 60_000.0  # a minute: the rule fits
    response = _create(alice, **weekly)

    assert response.status_code == 201


def test_a_rule_that_never_matches_is_refused_with_a_reason(alice):
    # Every 7 days from a Monday is never a Tuesday: no answer within any budget.
    response = _create(alice, rrule="FREQ=DAILY;INTERVAL=7;BYDAY=TU", fire_at="2025-01-06T09:00Z")

    _assert_too_costly(response)


def test_the_issues_sparse_rule_is_accepted_with_its_first_occurrence(alice, monkeypatch):
    # Admitted by its counted work. Its CPU on an idle machine (13-17 ms) is close to the
    # 20 ms backstop, which a loaded machine's CPU clock can pass: a clock that stands still
    # leaves the answer to the count alone.
    frozen = CpuBudget(limit_ms=settings.RECURRENCE_BUDGET_MS, clock=lambda: 0.0)
    monkeypatch.setattr(notifications.services, "recurrence_budget", lambda: frozen)
    monkeypatch.setattr(delivery.validation, "recurrence_budget", lambda: frozen)
    response = _create(
        alice,
        rrule="FREQ=MINUTELY;INTERVAL=11;BYMINUTE=7;BYHOUR=3;BYDAY=MO",
        fire_at="2026-11-30T02:56:00Z",
    )

    assert response.status_code == 201
    assert response.json()["next_fire_at"] == "2026-11-30T03:07:00Z"


@pytest.mark.parametrize("digit", ["²", "³", "①", "٣", "\uff13"])
@pytest.mark.parametrize(
    "template",
    [
        "FREQ=DAILY;INTERVAL={}",
        "FREQ=DAILY;COUNT={}",
        "FREQ=DAILY;BYHOUR={}",
        "FREQ=DAILY;BYMINUTE=1{}",
        "FREQ=MONTHLY;BYMONTHDAY={}",
        "FREQ=MONTHLY;BYDAY={}MO",
        "FREQ=MONTHLY;BYDAY=MO;BYSETPOS={}",
        "FREQ=YEARLY;BYMONTH={}",
        "FREQ=DAILY;UNTIL=2027010{}",
    ],
)
def test_non_ascii_digits_in_an_rrule_are_a_clear_400(alice, template, digit):
    response = _create(alice, rrule=template.format(digit))

    assert response.status_code == 400
    assert response.json()["errors"]["rrule"]


def test_fire_at_without_offset_is_wall_clock_in_the_notifications_zone(alice):
    winter = _create(alice, fire_at="2031-01-15T08:30:00", timezone="Europe/Berlin").json()
    summer = _create(alice, fire_at="2031-07-15T08:30:00", timezone="Europe/Berlin").json()
    offset = _create(alice, fire_at="2031-01-15T08:30:00+00:00", timezone="Europe/Berlin").json()

    assert (winter["fire_at"], winter["next_fire_at"]) == (
        "2031-01-15T07:30:00Z",
        "2031-01-15T07:30:00Z",
    )
    assert summer["next_fire_at"] == "2031-07-15T06:30:00Z"
    assert offset["next_fire_at"] == "2031-01-15T08:30:00Z"


def test_a_patched_fire_at_without_offset_uses_the_rows_zone(alice):
    row = make_notification(
        tenant=alice.tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=datetime(2031, 1, 1, tzinfo=UTC),
        timezone="America/New_York",
    )

    response = alice.client().patch(
        f"/v1/notifications/{row.pk}", {"fire_at": "2031-01-15T08:30:00"}, format="json"
    )

    assert response.json()["next_fire_at"] == "2031-01-15T13:30:00Z"


def test_a_wall_clock_fire_at_in_a_dst_gap_moves_forward_by_the_gap(alice):
    body = _create(alice, fire_at="2031-03-30T02:30:00", timezone="Europe/Berlin").json()

    assert body["next_fire_at"] == "2031-03-30T01:30:00Z"  # 03:30 CEST


def test_fire_at_is_truncated_to_whole_seconds(alice):
    body = _create(alice, fire_at="2031-01-15T08:30:00.987654Z").json()

    assert body["fire_at"] == body["next_fire_at"] == "2031-01-15T08:30:00Z"


def test_every_monday_9_00_fires_at_second_0(alice):
    # The README's rule, created at some seconds past the minute on a Monday morning.
    body = _create(
        alice,
        rrule="FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0",
        fire_at="2031-01-06T08:30:24Z",
    ).json()
    row = Notification.objects.get(pk=body["id"])

    assert body["next_fire_at"] == "2031-01-06T09:00:00Z"
    following = next_occurrence(
        rrule=row.rrule, tz_name="UTC", anchor=row.recurrence_anchor, after=row.next_fire_at
    )
    assert following == datetime(2031, 1, 13, 9, 0, tzinfo=UTC)


def test_a_rule_naming_only_the_hour_fires_at_second_0_and_the_anchors_minute(alice):
    body = _create(alice, rrule="FREQ=DAILY;BYHOUR=9", fire_at="2031-01-06T08:30:24Z").json()

    assert body["next_fire_at"] == "2031-01-06T09:30:00Z"


def test_a_rule_with_bysecond_keeps_it(alice):
    body = _create(
        alice, rrule="FREQ=DAILY;BYHOUR=9;BYSECOND=15", fire_at="2031-01-06T08:30:24Z"
    ).json()

    assert body["next_fire_at"] == "2031-01-06T09:30:15Z"


def test_a_rule_without_time_parts_keeps_the_anchors_seconds(alice):
    body = _create(alice, rrule="FREQ=DAILY", fire_at="2031-01-06T08:30:24Z").json()

    assert body["next_fire_at"] == "2031-01-06T08:30:24Z"
