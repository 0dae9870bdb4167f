"""The delivery log: GET /v1/deliveries?notification_id= and /v1/notifications/{id}/deliveries."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from notifications.models import Delivery
from tests.notifications.factories import make_notification


def make_delivery(*, tenant, notification_id, minutes_ago=0, **fields):
    values = {
        "occurrence": 1,
        "channel": "webhook",
        "outcome": "delivered",
        "http_status": 200,
        "duration_ms": 12,
        "attempted_at": timezone.now() - timedelta(minutes=minutes_ago),
        **fields,
    }
    return Delivery.objects.create(tenant=tenant, notification_id=notification_id, **values)


def test_log_of_a_notification_is_newest_first(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    older = make_delivery(tenant=alice.tenant, notification_id=notification.id, minutes_ago=5)
    newer = make_delivery(
        tenant=alice.tenant,
        notification_id=notification.id,
        occurrence=2,
        outcome="failed",
        http_status=503,
        error_category="http_5xx",
        late_ms=1500,
    )
    make_delivery(tenant=alice.tenant, notification_id=uuid.uuid4())

    response = alice.client().get(f"/v1/notifications/{notification.id}/deliveries")

    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["occurrence"] for r in results] == [newer.occurrence, older.occurrence]
    assert results[0] == {
        "notification_id": str(notification.id),
        "occurrence": 2,
        "channel": "webhook",
        "outcome": "failed",
        "http_status": 503,
        "error_category": "http_5xx",
        "duration_ms": 12,
        "attempted_at": results[0]["attempted_at"],
        "late_ms": 1500,
        "skipped": None,
    }


def test_a_skipped_record_shows_its_count_and_instants(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    make_delivery(
        tenant=alice.tenant,
        notification_id=notification.id,
        channel="",
        outcome="skipped",
        http_status=None,
        duration_ms=0,
        skipped_count=9,
        skipped_first=datetime(2025, 3, 3, 9, 1, tzinfo=UTC),
        skipped_last=datetime(2025, 3, 3, 9, 9, tzinfo=UTC),
    )

    [result] = (
        alice.client().get(f"/v1/notifications/{notification.id}/deliveries").json()["results"]
    )

    assert (result["outcome"], result["channel"], result["late_ms"]) == ("skipped", "", None)
    assert result["skipped"] == {
        "count": 9,
        "first": "2025-03-03T09:01:00Z",
        "last": "2025-03-03T09:09:00Z",
    }


def test_the_log_outlives_a_deleted_one_shot(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    make_delivery(
        tenant=alice.tenant,
        notification_id=notification.id,
        outcome="dead_lettered",
        error_category="exhausted",
    )
    notification_id = notification.id
    notification.delete()

    by_filter = alice.client().get(f"/v1/deliveries?notification_id={notification_id}")
    nested = alice.client().get(f"/v1/notifications/{notification_id}/deliveries")

    assert by_filter.status_code == 200
    assert [r["outcome"] for r in by_filter.json()["results"]] == ["dead_lettered"]
    assert by_filter.json()["results"][0]["error_category"] == "exhausted"
    assert nested.status_code == 404


def test_unfiltered_log_is_tenant_scoped(alice, charlie):
    mine = make_delivery(tenant=alice.tenant, notification_id=uuid.uuid4())
    theirs = make_delivery(tenant=charlie.tenant, notification_id=uuid.uuid4())

    alices = alice.client().get("/v1/deliveries").json()["results"]
    filtered = charlie.client().get(f"/v1/deliveries?notification_id={mine.notification_id}")

    assert [r["notification_id"] for r in alices] == [str(mine.notification_id)]
    assert filtered.json()["results"] == []
    assert str(theirs.notification_id) not in str(alices)


@pytest.mark.parametrize("value", ["nope", "", "1234", "x" * 500])
def test_malformed_notification_id_is_a_400_problem(alice, value):
    response = alice.client().get("/v1/deliveries", {"notification_id": value})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "notification_id" in response.json()["errors"]


def test_pages_follow_the_cursor(alice):
    notification_id = uuid.uuid4()
    for minutes in range(5):
        make_delivery(
            tenant=alice.tenant,
            notification_id=notification_id,
            minutes_ago=minutes,
            occurrence=minutes + 1,
        )
    client = alice.client()

    first = client.get("/v1/deliveries", {"limit": 3}).json()
    second = client.get(first["next"]).json()

    assert [r["occurrence"] for r in first["results"]] == [1, 2, 3]
    assert [r["occurrence"] for r in second["results"]] == [4, 5]
    assert second["next"] is None and second["previous"] is not None


def test_member_may_read_the_log(bob):
    make_delivery(tenant=bob.tenant, notification_id=uuid.uuid4())

    response = bob.client().get("/v1/deliveries")

    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


def test_log_query_counts_are_pinned(alice, django_assert_num_queries):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    for minutes in range(10):
        make_delivery(tenant=alice.tenant, notification_id=notification.id, minutes_ago=minutes)
    client = alice.client()
    client.get("/v1/deliveries")  # first use of the token records last_used_at

    # the token with its membership, the rate-limit count, page
    with django_assert_num_queries(3):
        assert len(client.get("/v1/deliveries").json()["results"]) == 10
    # the token with its membership, the rate-limit count, notification exists, page
    with django_assert_num_queries(4):
        client.get(f"/v1/notifications/{notification.id}/deliveries")
