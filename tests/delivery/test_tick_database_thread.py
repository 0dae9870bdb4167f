"""Where the tick's claims and write-backs run (delivery/scheduler/database_thread.py): on
PostgreSQL outside a transaction, in order on a thread and connection of their own, so
deliveries go on while a claim or a write-back runs; inline in a transaction (a test's) and
on SQLite, where a second connection would not see the tick's rows or would fight it for
the one writer."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.models import Delivery, Notification
from delivery.scheduler import rowlane, tick
from delivery.scheduler.context import TickSummary
from delivery.scheduler.database_thread import (
    DatabaseThread,
    InlineDatabase,
    database_for_this_tick,
)
from delivery.scheduler.writeback import WriteBackBuffer, write_back
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import Reply, recording_server

ROWS = 24
SLOTS = 2


def tick_over_due_rows(url: str) -> TickSummary:
    """One tick over ROWS due webhook rows of one tenant's endpoint at `url`."""
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=url)
    make_notifications(
        ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
    )
    return tick.run_tick(max_rows=ROWS, time_budget=120)


def assert_every_row_delivered(summary: TickSummary) -> None:
    assert summary.delivered == ROWS
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS
    assert not Notification.objects.exclude(state="completed").exists()


def test_in_a_transaction_the_database_work_runs_inline(db):
    database = database_for_this_tick()
    assert isinstance(database, InlineDatabase)
    assert database.submit(threading.current_thread).result() is threading.current_thread()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_deliveries_go_on_while_a_claim_runs(monkeypatch, settings):
    """The second claim is held until every row of the first has reached the receiver,
    which holds its first answers until that claim is held: the first claim's rows beyond
    the endpoint's slots can only start while the second claim runs. Inline, the tick
    itself would be the one held, and they never would (the hold gives up after 30 s)."""
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = SLOTS
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    held, first_batch_in = threading.Event(), threading.Event()
    first_claim: list[int] = []
    received_when: list[int] = []

    def responder(request) -> Reply:
        held.wait(30)
        if len(server.received()) >= first_claim[0]:
            first_batch_in.set()
        return Reply(200)

    claim = rowlane.RowClaims.claim
    threads = []

    def second_claim_held(self, request):
        threads.append(threading.current_thread().name)
        if len(threads) == 2:
            received_when.append(len(server.received()))
            held.set()
            first_batch_in.wait(30)
            received_when.append(len(server.received()))
        claimed = claim(self, request)
        first_claim.append(len(claimed))
        return claimed

    monkeypatch.setattr(rowlane.RowClaims, "claim", second_claim_held)
    with recording_server(responder) as server:
        summary = tick_over_due_rows(server.url)

    assert first_claim[0] > SLOTS  # some of its rows had to wait for a slot
    assert received_when[0] <= SLOTS
    assert received_when[1] == first_claim[0]  # all of them, while the claim was held
    assert all(name.startswith("tick-database") for name in threads)
    assert_every_row_delivered(summary)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_the_database_thread_closes_its_connection():
    database = database_for_this_tick()
    assert isinstance(database, DatabaseThread)
    opened = database.submit(lambda: connection.cursor().close() or connection.connection).result()

    database.close()

    assert opened.closed


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_deliveries_are_collected_while_a_write_back_runs(monkeypatch, settings):
    """The first write-back is held until the tick has collected a finished delivery
    meanwhile; the receiver holds the answers beyond the endpoint's first slots' worth until
    then, so some delivery is in flight when the write-back starts. Inline, the tick itself
    would be the one held, and would collect nothing (the hold gives up after 30 s)."""
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = SLOTS
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    held, collected_meanwhile = threading.Event(), threading.Event()

    def responder(request) -> Reply:
        if len(server.received()) > SLOTS:
            held.wait(30)
        return Reply(200)

    add = WriteBackBuffer.add

    def noting_add(self, plan):
        if held.is_set():
            collected_meanwhile.set()
        return add(self, plan)

    writes: list[tuple[str, bool]] = []

    def first_write_held(plans, **kwargs):
        if not writes:
            held.set()
            writes.append((threading.current_thread().name, collected_meanwhile.wait(30)))
        else:
            writes.append((threading.current_thread().name, True))
        return write_back(plans, **kwargs)

    monkeypatch.setattr(WriteBackBuffer, "add", noting_add)
    monkeypatch.setattr(tick, "write_back", first_write_held)
    with recording_server(responder) as server:
        summary = tick_over_due_rows(server.url)

    assert writes[0] == ("tick-database_0", True)  # collected while it was held
    assert all(name.startswith("tick-database") for name, _ in writes)
    assert_every_row_delivered(summary)
