"""A tick leaves the objects older than it out of the garbage collector's passes while it
runs (a full pass would stop its threads to rescan them all), and hands them back after."""

import gc
from datetime import UTC, datetime

from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_objects_older_than_a_tick_are_frozen_while_it_runs_and_only_then(db):
    frozen_while_sending: list[int] = []

    def webhook(message, *, timeout):
        frozen_while_sending.append(gc.get_freeze_count())
        return DeliveryResult(ok=True, http_status=200)

    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    make_notifications(3, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    before = gc.get_freeze_count()

    summary = run_tick(now=NOW, senders=Senders(email=webhook, webhook=webhook))

    assert summary.delivered == 3
    assert len(frozen_while_sending) == 3
    assert min(frozen_while_sending) > before
    assert gc.get_freeze_count() == before
