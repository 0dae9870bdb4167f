"""A message's attempts and its deliveries per endpoint through the API: /attempts is a page
of one row per request sent (why each failed one failed, its error redacted; deferrals and
dead-letter verdicts are not attempts), /endpoints the page of per-endpoint summaries, each
at a constant number of statements whatever the rows; /v1/deliveries?message_id= the whole
log of the message's deliveries."""

import socket
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from delivery.models import Delivery, Notification
from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint
from tests.support.http_server import Reply, recording_server, silent_server
from webhooks.event_types import event_type_create
from webhooks.messages import message_resend, publish_message

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"
ATTEMPT_FIELDS = {
    "id",
    "notification_id",
    "endpoint_id",
    "attempt",
    "outcome",
    "http_status",
    "error_category",
    "error",
    "created_at",
}
ENDPOINT_FIELDS = {
    "endpoint_id",
    "notification_id",
    "status",
    "attempts",
    "last_outcome",
    "last_http_status",
    "last_attempted_at",
    "next_attempt_at",
}


@pytest.fixture(autouse=True)
def _order_shipped(alice, charlie):
    for actor in (alice, charlie):
        event_type_create(tenant=actor.tenant, name="order.shipped")


def _publish(actor, *, now=NOW):
    return publish_message(tenant=actor.tenant, event_type="order.shipped", payload={}, now=now)


def _log(delivery, *, outcome="failed", attempt=1, **fields):
    return Delivery.objects.create(
        tenant_id=delivery.tenant_id,
        notification_id=delivery.id,
        endpoint_id=delivery.webhook_endpoint_id,
        occurrence=1,
        attempt=attempt,
        channel="webhook",
        outcome=outcome,
        **fields,
    )


def _closed_port() -> int:
    """A local port nothing listens on: a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.usefixtures("local_channels")
def test_attempts_are_a_page_of_one_row_per_request_newest_first(alice):
    answers = iter([Reply(status=500)])
    with recording_server(lambda request: next(answers, Reply())) as server:
        endpoint = make_endpoint(tenant=alice.tenant, url=f"{server.url}/hook")
        message = _publish(alice)
        assert run_tick(now=NOW + timedelta(seconds=1)).backed_off == 1
        assert run_tick(now=NOW + timedelta(hours=1)).delivered == 1
    [delivery] = Notification.objects.filter(message=message)

    response = alice.client().get(f"/v1/messages/{message.id}/attempts")

    assert response.status_code == 200
    page = response.json()
    assert set(page) == {"results", "next", "previous"}
    delivered, failed = page["results"]
    assert set(delivered) == set(failed) == ATTEMPT_FIELDS
    for row in (delivered, failed):
        assert (row["notification_id"], row["endpoint_id"]) == (str(delivery.id), str(endpoint.id))
    assert (delivered["attempt"], delivered["outcome"], delivered["http_status"]) == (
        2,
        "delivered",
        200,
    )
    assert (delivered["error_category"], delivered["error"]) == (None, "")
    assert (failed["attempt"], failed["outcome"], failed["http_status"]) == (1, "failed", 500)
    assert (failed["error_category"], failed["error"]) == ("http_5xx", "webhook answered HTTP 500")
    assert failed["id"] == Delivery.objects.get(notification_id=delivery.id, attempt=1).id


@pytest.mark.usefixtures("local_channels")
def test_a_failed_attempt_says_why_whatever_went_wrong(alice, settings):
    """What the tick records for each kind of failure is what the page shows: a status
    and its category, a timeout, a refused connection."""
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    with (
        recording_server(lambda request: Reply(status=400)) as refusing,
        silent_server() as silent,
    ):
        urls = {
            "http_4xx": f"{refusing.url}/hook",
            "timeout": silent.url,
            "connection": f"http://127.0.0.1:{_closed_port()}/hook",
        }
        endpoints = {
            make_endpoint(tenant=alice.tenant, url=url).id: category
            for category, url in urls.items()
        }
        message = _publish(alice)
        run_tick(now=NOW + timedelta(seconds=1))

    rows = alice.client().get(f"/v1/messages/{message.id}/attempts").json()["results"]

    shown = {uuid.UUID(row["endpoint_id"]): row for row in rows}
    assert {endpoint: row["error_category"] for endpoint, row in shown.items()} == endpoints
    by_category = {row["error_category"]: row for row in rows}
    assert (by_category["http_4xx"]["outcome"], by_category["http_4xx"]["http_status"]) == (
        "failed",
        400,
    )
    assert by_category["timeout"]["outcome"] == "timeout"
    assert by_category["connection"]["outcome"] == "failed"
    for row in rows:
        assert row["error"], row
        assert "127.0.0.1" not in row["error"]
    assert by_category["timeout"]["http_status"] is by_category["connection"]["http_status"]
    assert by_category["connection"]["http_status"] is None


def test_deferrals_and_dead_letter_verdicts_are_not_attempts(alice):
    make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice)
    [delivery] = Notification.objects.filter(message=message)
    failed = _log(delivery, outcome="failed", http_status=503, error_category="http_5xx")
    _log(delivery, outcome="deferred", error_category="circuit_open")
    _log(delivery, outcome="deferred", error_category="rate_limited")
    timed_out = _log(delivery, outcome="timeout", attempt=2, error_category="timeout")
    _log(delivery, outcome="dead_lettered", attempt=3, error_category="exhausted")

    rows = alice.client().get(f"/v1/messages/{message.id}/attempts").json()["results"]

    assert [row["id"] for row in rows] == [timed_out.id, failed.id]
    [summary] = alice.client().get(f"/v1/messages/{message.id}/endpoints").json()["results"]
    assert summary["attempts"] == 2


def test_an_attempt_s_error_is_redacted_as_the_delivery_log_s(alice):
    make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice)
    [delivery] = Notification.objects.filter(message=message)
    _log(
        delivery,
        error_category="connection",
        error="connection to https://hooks.example.com/in?token=s3cret (10.0.0.7) refused",
    )

    [row] = alice.client().get(f"/v1/messages/{message.id}/attempts").json()["results"]
    [logged] = alice.client().get(f"/v1/deliveries?message_id={message.id}").json()["results"]

    assert "s3cret" not in row["error"] and "10.0.0.7" not in row["error"]
    assert row["error"] == logged["error"]


def test_a_resend_s_attempts_join_the_message_s_under_their_own_delivery(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice)
    [first] = Notification.objects.filter(message=message)
    _log(first, outcome="delivered", http_status=200)
    Notification.objects.filter(pk=first.pk).update(
        state="completed", next_fire_at=None, due_at=None
    )
    again = message_resend(tenant=alice.tenant, message_id=message.id, endpoint_id=endpoint.id)
    _log(again, outcome="failed", http_status=502, error_category="http_5xx")

    rows = alice.client().get(f"/v1/messages/{message.id}/attempts").json()["results"]
    [summary] = alice.client().get(f"/v1/messages/{message.id}/endpoints").json()["results"]

    assert [(row["notification_id"], row["http_status"]) for row in rows] == [
        (str(again.id), 502),
        (str(first.id), 200),
    ]
    assert (summary["notification_id"], summary["attempts"]) == (str(again.id), 2)
    assert (summary["status"], summary["last_http_status"]) == ("pending", 502)


def test_the_endpoints_page_summarises_each_endpoint_newest_first(alice):
    older = make_endpoint(tenant=alice.tenant, url=URL)
    newer = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice)
    deliveries = {
        row.webhook_endpoint_id: row for row in Notification.objects.filter(message=message)
    }
    _log(deliveries[older.id], outcome="failed", http_status=500, error_category="http_5xx")
    client = alice.client()

    first = client.get(f"/v1/messages/{message.id}/endpoints?limit=1")
    second = client.get(first.json()["next"])

    assert first.status_code == second.status_code == 200
    [newest] = first.json()["results"]
    [oldest] = second.json()["results"]
    assert set(newest) == set(oldest) == ENDPOINT_FIELDS
    assert (newest["endpoint_id"], newest["notification_id"]) == (
        str(newer.id),
        str(deliveries[newer.id].id),
    )
    assert (newest["status"], newest["attempts"], newest["last_outcome"]) == ("pending", 0, None)
    assert (oldest["endpoint_id"], oldest["notification_id"]) == (
        str(older.id),
        str(deliveries[older.id].id),
    )
    assert (oldest["attempts"], oldest["last_outcome"], oldest["last_http_status"]) == (
        1,
        "failed",
        500,
    )
    assert second.json()["next"] is None


def test_the_attempts_page_follows_its_cursor(alice):
    make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice)
    [delivery] = Notification.objects.filter(message=message)
    logged = [_log(delivery, attempt=n, http_status=500) for n in (1, 2, 3)]
    client = alice.client()

    seen, path = [], f"/v1/messages/{message.id}/attempts?limit=2"
    while path:
        page = client.get(path).json()
        seen += [row["attempt"] for row in page["results"]]
        path = page["next"]

    assert seen == [3, 2, 1]
    assert len(logged) == 3


def test_another_tenant_s_message_is_404_and_stray_parameters_are_400(alice, charlie):
    make_endpoint(tenant=charlie.tenant, url=URL)
    theirs = _publish(charlie)
    mine = _publish(alice)
    client = alice.client()

    for tail in ("attempts", "endpoints"):
        assert client.get(f"/v1/messages/{theirs.id}/{tail}").status_code == 404
        assert client.get(f"/v1/messages/{uuid.uuid4()}/{tail}").status_code == 404
        refused = client.get(f"/v1/messages/{mine.id}/{tail}?outcome=failed")
        assert refused.status_code == 400
        assert "outcome" in refused.json()["errors"]


def _statements(client, path):
    with CaptureQueriesContext(connection) as context:
        response = client.get(path)
    assert response.status_code == 200
    return len(context.captured_queries), len(response.json()["results"])


@pytest.mark.parametrize("tail", ["attempts", "endpoints"])
def test_a_page_costs_the_same_statements_whatever_its_rows(alice, tail):
    make_endpoint(tenant=alice.tenant, url=URL)
    small = _publish(alice)
    for _ in range(4):
        make_endpoint(tenant=alice.tenant, url=URL)
    large = _publish(alice, now=NOW + timedelta(seconds=1))
    for delivery in Notification.objects.filter(message=small):
        _log(delivery)
    for delivery in Notification.objects.filter(message=large):
        for attempt in (1, 2, 3):
            _log(delivery, attempt=attempt, http_status=500)
    client = alice.client()
    client.get(f"/v1/messages/{small.id}/{tail}")  # the token's first use writes its bookmark

    few, few_rows = _statements(client, f"/v1/messages/{small.id}/{tail}")
    many, many_rows = _statements(client, f"/v1/messages/{large.id}/{tail}")

    assert (few_rows, many_rows) == ((1, 15) if tail == "attempts" else (1, 5))
    assert few == many


def test_the_delivery_log_filters_on_a_message_s_deliveries(alice, charlie):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    make_endpoint(tenant=charlie.tenant, url=URL)
    message, other = _publish(alice), _publish(alice, now=NOW + timedelta(seconds=1))
    [delivery] = Notification.objects.filter(message=message)
    [elsewhere] = Notification.objects.filter(message=other)
    kept = [
        _log(delivery, outcome="failed", http_status=500),
        _log(delivery, outcome="deferred", error_category="circuit_open"),
        _log(delivery, outcome="dead_lettered", error_category="exhausted"),
    ]
    _log(elsewhere, outcome="delivered")
    theirs = _publish(charlie)
    [their_delivery] = Notification.objects.filter(message=theirs)
    _log(their_delivery, outcome="delivered")
    client = alice.client()

    listed = client.get(f"/v1/deliveries?message_id={message.id}").json()["results"]
    failed = client.get(f"/v1/deliveries?message_id={message.id}&outcome=failed").json()
    their_log = client.get(f"/v1/deliveries?message_id={theirs.id}")

    assert {row["id"] for row in listed} == {row.id for row in kept}
    assert {row["endpoint_id"] for row in listed} == {str(endpoint.id)}
    assert [row["id"] for row in failed["results"]] == [kept[0].id]
    assert their_log.status_code == 200
    assert their_log.json()["results"] == []
    for bad in ("nope", "1", f"{message.id}&message_id={message.id}"):
        refused = client.get(f"/v1/deliveries?message_id={bad}")
        assert refused.status_code == 400
        assert "message_id" in refused.json()["errors"]
