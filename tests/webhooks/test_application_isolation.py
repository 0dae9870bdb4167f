"""No message reaches another application's endpoint: 50 applications, each with its own
endpoint on a real local receiver (plus the tenant's own endpoint), messages published to
every application at once (in parallel threads on real PostgreSQL connections; one after
another on SQLite, which takes one writer at a time), then the tick: each receiver got
exactly its own application's messages."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_tenant
from tests.support.concurrency import Threads
from tests.support.http_server import recording_server
from webhooks.applications import application_create
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("local_channels")]

APPLICATIONS = 50
MESSAGES_EACH = 2


def test_fifty_applications_published_to_at_once_get_only_their_own_messages():
    tenant = make_tenant()
    event_type_create(tenant=tenant, name="invoice.paid")
    with recording_server() as server:
        make_endpoint(tenant=tenant, url=f"{server.url}/own")
        for n in range(APPLICATIONS):
            application = application_create(tenant=tenant, uid=f"customer-{n}", name=f"C{n}")
            make_endpoint(tenant=tenant, url=f"{server.url}/app-{n}", application_id=application.pk)

        def publisher(n: int):
            def publish() -> None:
                for sequence in range(MESSAGES_EACH):
                    publish_message(
                        tenant=tenant,
                        event_type="invoice.paid",
                        payload={"customer": n, "sequence": sequence},
                        application=f"customer-{n}",
                    )

            return publish

        publishers = [publisher(n) for n in range(APPLICATIONS)]
        if connection.vendor == "postgresql":
            Threads(publishers).start().join()
        else:
            for publish in publishers:
                publish()
        now = timezone.now() + timedelta(seconds=1)
        while run_tick(now=now).claimed:
            pass

        for n in range(APPLICATIONS):
            bodies = [json.loads(request.body) for request in server.received(f"/app-{n}")]
            assert sorted(body["data"]["sequence"] for body in bodies) == [0, 1], n
            assert {body["data"]["customer"] for body in bodies} == {n}
        assert server.received("/own") == []
        assert len(server.received()) == APPLICATIONS * MESSAGES_EACH
