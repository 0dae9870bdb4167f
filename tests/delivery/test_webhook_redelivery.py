"""Every attempt of an occurrence delivers the same bytes under the same webhook-id; only
webhook-timestamp and the signature change (docs/api.md, "Verifying a webhook signature").
Against a real local receiver."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from delivery.scheduler.deliver import default_senders, deliver_row
from delivery.scheduler.tick import notification_claim, run_tick
from delivery.transports import webhook as webhook_transport
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.http_server import RecordedRequest, Reply, recording_server

pytestmark = pytest.mark.usefixtures("local_channels")

DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


class AttemptClock:
    """The webhook transport's clock, moved on between attempts, so two attempts seconds
    apart in the test carry different webhook-timestamps that a verifier still accepts."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()


@pytest.fixture
def attempt_clock(monkeypatch) -> AttemptClock:
    clock = AttemptClock()
    monkeypatch.setattr(webhook_transport, "time", clock)
    return clock


def failing_once():
    answers = iter([Reply(status=500)])
    return lambda request: next(answers, Reply())


def assert_redeliveries(requests: list[RecordedRequest], secret: str) -> None:
    first, second = requests
    assert first.body == second.body
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-timestamp"] != second.headers["webhook-timestamp"]
    for request in requests:
        Webhook(secret).verify(request.body, request.headers)
    event = json.loads(first.body)
    assert event["timestamp"] == event["data"]["scheduled_for"] == "2025-03-03T09:00:00Z"


def test_a_retry_after_a_failure_sends_the_first_attempt_s_bytes(tenant, attempt_clock):
    with recording_server(failing_once()) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

        assert run_tick(now=DUE + timedelta(seconds=3)).backed_off == 1
        attempt_clock.offset = 90
        assert run_tick(now=DUE + timedelta(seconds=75)).delivered == 1

        requests = server.received("/hook")
    assert_redeliveries(requests, endpoint.secret)


def test_a_row_reclaimed_after_a_crash_sends_the_same_bytes_again(tenant, attempt_clock):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)
        # A tick claims the row and delivers it, then dies before writing anything back.
        [claimed] = notification_claim(now=DUE, lease=timedelta(seconds=45), limit=1)
        with ThreadPoolExecutor(max_workers=2) as pool:
            deliver_row(
                claimed,
                endpoint=endpoint,
                now=DUE + timedelta(seconds=1),
                senders=default_senders(),
                pool=pool,
                timeout=5.0,
            )
        attempt_clock.offset = 60

        # Its lease expires; the next tick reclaims and delivers the occurrence again.
        assert run_tick(now=DUE + timedelta(seconds=60)).delivered == 1

        requests = server.received("/hook")
    assert_redeliveries(requests, endpoint.secret)


def test_a_custom_event_is_stamped_with_its_due_time_too(tenant, attempt_clock):
    event = {"type": "project.activated", "data": {"project_id": "p1"}}
    with recording_server(failing_once()) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE, webhook_event=event)

        run_tick(now=DUE + timedelta(seconds=2))
        attempt_clock.offset = 90
        run_tick(now=DUE + timedelta(seconds=70))

        first, second = server.received()
    assert first.body == second.body
    assert json.loads(first.body) == {
        "type": "project.activated",
        "timestamp": "2025-03-03T09:00:00Z",
        "data": {"project_id": "p1"},
    }
