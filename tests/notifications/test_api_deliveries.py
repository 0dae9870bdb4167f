"""The delivery log: GET /v1/deliveries?notification_id= and /v1/notifications/{id}/deliveries."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery
from tests.delivery.factories import make_notification


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
        "id": newer.id,
        "notification_id": str(notification.id),
        "endpoint_id": None,
        "occurrence": 2,
        "attempt": None,
        "channel": "webhook",
        "recipient": "",
        "outcome": "failed",
        "http_status": 503,
        "error_category": "http_5xx",
        "error": "",
        "duration_ms": 12,
        "attempted_at": results[0]["attempted_at"],
        "late_ms": 1500,
        "skipped": None,
        "created_at": results[0]["created_at"],
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


def test_the_log_is_filtered_by_notification_endpoint_outcome_and_since(alice):
    now = timezone.now()
    first, second = uuid.uuid4(), uuid.uuid4()
    endpoint, other_endpoint = uuid.uuid4(), uuid.uuid4()
    rows = {
        "old": make_delivery(
            tenant=alice.tenant, notification_id=first, endpoint_id=endpoint, minutes_ago=60
        ),
        "failed": make_delivery(
            tenant=alice.tenant,
            notification_id=first,
            endpoint_id=endpoint,
            outcome="failed",
            minutes_ago=5,
        ),
        "elsewhere": make_delivery(
            tenant=alice.tenant, notification_id=second, endpoint_id=other_endpoint, minutes_ago=1
        ),
        "mail": make_delivery(
            tenant=alice.tenant, notification_id=second, channel="email", minutes_ago=2
        ),
    }
    since = (now - timedelta(minutes=10)).isoformat().replace("+00:00", "Z")

    def ids(query: str) -> list[int]:
        response = alice.client().get(f"/v1/deliveries?{query}")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert ids(f"notification_id={first}") == [rows["failed"].id, rows["old"].id]
    assert ids(f"endpoint_id={endpoint}") == [rows["failed"].id, rows["old"].id]
    assert ids("outcome=failed") == [rows["failed"].id]
    assert ids(f"since={since}") == [rows["elsewhere"].id, rows["mail"].id, rows["failed"].id]
    assert ids(f"endpoint_id={endpoint}&since={since}&outcome=failed") == [rows["failed"].id]
    # Without an offset, UTC.
    naive = (now - timedelta(minutes=3)).astimezone(UTC).replace(tzinfo=None).isoformat()
    assert ids(f"since={naive}") == [rows["elsewhere"].id, rows["mail"].id]


@pytest.mark.parametrize(
    "query",
    [
        "endpoint_id=nope",
        "outcome=lost",
        "since=yesterday",
        "since=2026-02-30T00:00:00Z",
        "since=9999-12-31T23:59:59-23:00",
        "since=%D9%A2026-01-01T00:00:00Z",
        "outcome=failed&outcome=delivered",
        "endpoint=x",
    ],
)
def test_a_bad_filter_is_400_naming_it(alice, query):
    response = alice.client().get(f"/v1/deliveries?{query}")

    assert response.status_code == 400
    name = query.split("=", 1)[0]
    assert name in response.json()["errors"]


def test_the_error_shown_names_no_host_url_or_address(alice):
    row = make_delivery(
        tenant=alice.tenant,
        notification_id=uuid.uuid4(),
        outcome="timeout",
        error="timed out after 10s contacting https://hooks.internal.example:8443 (10.0.0.7)",
    )

    [shown] = alice.client().get("/v1/deliveries").json()["results"]

    assert shown["id"] == row.id
    assert shown["error"] == "timed out after 10s contacting <url> (<ip>)"


def test_another_tenants_endpoint_filter_shows_nothing(alice, charlie):
    endpoint = uuid.uuid4()
    make_delivery(tenant=alice.tenant, notification_id=uuid.uuid4(), endpoint_id=endpoint)

    response = charlie.client().get(f"/v1/deliveries?endpoint_id={endpoint}")

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_each_copy_of_an_email_shows_its_recipient(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    for key in ("ada", "bob"):
        make_delivery(
            tenant=alice.tenant,
            notification_id=notification.id,
            channel="email",
            recipient=key,
            outcome="delivered",
        )

    response = alice.client().get(f"/v1/deliveries?notification_id={notification.id}")

    results = response.json()["results"]
    assert sorted((r["channel"], r["recipient"]) for r in results) == [
        ("email", "ada"),
        ("email", "bob"),
    ]
