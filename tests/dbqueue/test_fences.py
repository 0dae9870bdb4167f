"""fenced_update_many: each row gets its own values, only under the claim that took it, in
one statement per shape of change."""

from datetime import UTC, datetime, timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from dbqueue.fences import fenced_update_many
from delivery.models import Notification
from tests.delivery.factories import make_notifications, make_tenant

AT = datetime(2026, 12, 5, 6, 30, tzinfo=UTC)
# What an array literal would have to quote or escape: it must arrive as it was.
AWKWARD = 'a "quoted", {braced} \\ NULL é'


def claimed_rows(count: int) -> list[Notification]:
    rows = make_notifications(count, tenant=make_tenant(), next_fire_at=AT)
    Notification.objects.update(claim_token=5, claimed_until=AT + timedelta(minutes=1))
    return rows


def test_each_row_gets_its_values_and_fenced_out_rows_nothing(db):
    first, second, third, stale = claimed_rows(4)
    later = AT + timedelta(hours=1)
    items = [
        # Same columns for all: one statement. Varying: a time (one NULL), JSON, text.
        (row.pk, 5 if row is not stale else 4, changes)
        for row, changes in [
            (
                first,
                {"next_fire_at": later, "channel_state": {}, "last_error": None, "error_count": 0},
            ),
            (
                second,
                {
                    "next_fire_at": None,
                    "channel_state": {"email": "delivered"},
                    "last_error": AWKWARD,
                    "error_count": 0,
                },
            ),
            (
                third,
                {
                    "next_fire_at": later,
                    "channel_state": {},
                    "last_error": "y" * 500,
                    "error_count": 0,
                },
            ),
            (
                stale,
                {"next_fire_at": later, "channel_state": {}, "last_error": None, "error_count": 0},
            ),
        ]
    ]

    with CaptureQueriesContext(connection) as statements:
        applied = fenced_update_many(Notification, items)

    assert applied == {first.pk, second.pk, third.pk}
    assert len(statements.captured_queries) == 1
    got = {row.pk: row for row in Notification.objects.all()}
    assert [
        (got[r.pk].next_fire_at, got[r.pk].channel_state, got[r.pk].last_error)
        for r in (first, second, third)
    ] == [
        (later, {}, None),
        (None, {"email": "delivered"}, AWKWARD),
        (later, {}, "y" * 500),
    ]
    assert all(got[r.pk].claimed_until is None for r in (first, second, third))
    assert got[stale.pk].claimed_until is not None and got[stale.pk].next_fire_at == AT


def test_rows_of_different_shapes_go_in_a_statement_each(db):
    first, second = claimed_rows(2)

    with CaptureQueriesContext(connection) as statements:
        applied = fenced_update_many(
            Notification,
            [
                (first.pk, 5, {"error_count": 2}),
                (second.pk, 5, {"subject": "New", "error_count": 1}),
            ],
        )

    assert applied == {first.pk, second.pk}
    assert len(statements.captured_queries) == 2
    assert list(
        Notification.objects.order_by("error_count").values_list("error_count", "subject")
    ) == [
        (1, "New"),
        (2, "Standup"),
    ]


def test_a_write_while_the_work_goes_on_keeps_the_lease(db):
    [row] = claimed_rows(1)

    assert fenced_update_many(Notification, [(row.pk, 5, {"error_count": 1})], release=False) == {
        row.pk
    }

    stored = Notification.objects.get()
    assert (stored.error_count, stored.claimed_until) == (1, AT + timedelta(minutes=1))
