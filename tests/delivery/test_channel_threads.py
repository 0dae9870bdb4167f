"""Where a row's channels run: a webhook alone on the row worker itself (its transport bounds
the exchange, so no hand-off to the channel pool and back is needed); two channels in
parallel on the channel pool, each bounded there by the channel timeout."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from delivery.scheduler.deliver import Senders, deliver_row
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


class ThreadsSeen:
    def __init__(self) -> None:
        self.by_channel: dict[str, str] = {}

    def sender(self, channel: str):
        def send(message, *, timeout):
            self.by_channel[channel] = threading.current_thread().name
            return DeliveryResult(ok=True, http_status=200)

        return send

    @property
    def senders(self) -> Senders:
        return Senders(email=self.sender("email"), webhook=self.sender("webhook"))


def deliver(notification, endpoint, seen: ThreadsSeen) -> dict[str, DeliveryResult]:
    with (
        ThreadPoolExecutor(1, thread_name_prefix="row") as rows,
        ThreadPoolExecutor(2, thread_name_prefix="channel") as channels,
    ):
        delivery = rows.submit(
            deliver_row,
            notification,
            endpoint=endpoint,
            now=NOW,
            senders=seen.senders,
            pool=channels,
            timeout=5.0,
        ).result()
    return delivery.results


def test_a_webhook_alone_goes_out_on_the_row_worker(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    seen = ThreadsSeen()

    results = deliver(row, endpoint, seen)

    assert results["webhook"].ok
    assert seen.by_channel["webhook"].startswith("row")


def test_a_webhook_beside_an_email_goes_out_on_the_channel_pool(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    row = make_notification(
        tenant=tenant,
        endpoint=endpoint,
        next_fire_at=NOW,
        channels=("email", "webhook"),
        email_to=["ada@example.com"],
    )
    seen = ThreadsSeen()

    results = deliver(row, endpoint, seen)

    assert list(results) == ["email:ada@example.com", "webhook"]
    assert all(r.ok for r in results.values())
    assert all(name.startswith("channel") for name in seen.by_channel.values())


def test_an_email_alone_keeps_the_channel_timeout_of_the_pool(db):
    tenant = make_tenant()
    row = make_notification(
        tenant=tenant, next_fire_at=NOW, channels=("email",), email_to=["ada@example.com"]
    )
    seen = ThreadsSeen()

    deliver(row, None, seen)

    assert seen.by_channel["email"].startswith("channel")
