"""A tick keeps connections to an endpoint alive across its deliveries and closes them when
it ends, against a real local receiver counting the connections it accepts (counts, never
time)."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_notifications
from tests.support.http_server import Reply, recording_server

pytestmark = pytest.mark.usefixtures("local_channels")

DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_200_deliveries_to_one_endpoint_reuse_its_connections(tenant):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        make_notifications(200, tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

        summary = run_tick(now=DUE + timedelta(seconds=1))

        assert summary.delivered == 200
        assert len(server.received("/hook")) == 200
        assert server.accepted <= settings.WEBHOOK_ENDPOINT_CONCURRENCY
        # The tick closed its connections on its way out.
        for _ in range(100):
            if server.settled():
                break
            time.sleep(0.05)
        assert server.settled()


def test_a_receiver_answering_connection_close_gets_every_delivery(tenant):
    with recording_server(lambda request: Reply(200, {"Connection": "close"})) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        make_notifications(40, tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

        summary = run_tick(now=DUE + timedelta(seconds=1))

        assert (summary.delivered, summary.backed_off) == (40, 0)
        assert server.accepted == 40


def test_a_receiver_closing_kept_alive_connections_gets_every_delivery(tenant):
    with recording_server(idle_timeout=0.005) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        make_notifications(60, tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

        summary = run_tick(now=DUE + timedelta(seconds=1))

        assert (summary.delivered, summary.backed_off) == (60, 0)
