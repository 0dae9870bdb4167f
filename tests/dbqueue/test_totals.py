"""Worker totals: cumulative counters written once per tick or batch."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from dbqueue.clock import Clock
from dbqueue.models import WorkerTotal
from dbqueue.totals import Histogram, worker_totals, worker_totals_add
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from jobs.consumer import jobs_drain
from tests.delivery.factories import make_notifications, make_tenant
from tests.jobs.factories import make_job

T1 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T2 = datetime(2026, 1, 1, 12, 1, tzinfo=UTC)


def test_increments_accumulate_and_zero_counts_write_no_row(db):
    worker_totals_add("run_tick", {"claimed": 3, "delivered": 3, "backed_off": 0}, now=T1)
    worker_totals_add("run_tick", {"claimed": 2, "delivered": 1, "backed_off": 1}, now=T2)

    totals = worker_totals()["run_tick"]

    assert {name: total for name, (total, _) in totals.items()} == {
        "runs": 2,
        "claimed": 5,
        "delivered": 4,
        "backed_off": 1,
    }
    assert totals["runs"][1] == T2
    assert totals["delivered"][1] == T2


def test_a_tick_adds_its_summary(db):
    def delivered(message, *, timeout):
        return DeliveryResult(ok=True, http_status=200)

    tenant = make_tenant()
    make_notifications(
        3, tenant=tenant, next_fire_at=timezone.now(), channels=["email"], email_to=["a@x.io"]
    )

    run_tick(senders=Senders(email=delivered, webhook=delivered))

    totals = {name: total for name, (total, _) in worker_totals()["run_tick"].items()}
    lateness = {name: totals.pop(name) for name in list(totals) if name.startswith("lateness_")}
    assert totals == {"runs": 1, "claimed": 3, "delivered": 3, "due_left": 0}
    assert sum(n for name, n in lateness.items() if name.startswith("lateness_le_")) == 3


def test_an_idle_consumer_batch_writes_nothing(db):
    jobs_drain(clock=Clock(), limit=10, max_seconds=5)

    assert not WorkerTotal.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_database_refusal_is_logged_not_raised(monkeypatch, caplog):
    monkeypatch.setattr(WorkerTotal._meta, "db_table", "no_such_table")

    worker_totals_add("run_tick", {"claimed": 1}, now=T1)

    assert "could not add to the run_tick totals" in caplog.text


def test_a_consumer_batch_with_work_adds_its_summary(alice):
    make_job(alice.tenant, kind="no-such-kind", now=timezone.now())

    jobs_drain(clock=Clock(), limit=10, max_seconds=5)

    totals = {name: total for name, (total, _) in worker_totals()["consume_jobs"].items()}
    assert totals == {"runs": 1, "claimed": 1, "dead_lettered": 1}


def test_gauges_are_set_and_counters_added_in_the_same_statement(db, django_assert_num_queries):
    worker_totals_add("run_tick", {"claimed": 5}, gauges={"due_left": 40}, now=T1)
    with django_assert_num_queries(1):
        worker_totals_add("run_tick", {"claimed": 2}, gauges={"due_left": 0}, now=T2)

    totals = worker_totals()["run_tick"]

    assert {name: total for name, (total, _) in totals.items()} == {
        "runs": 2,
        "claimed": 7,
        "due_left": 0,
    }
    assert totals["due_left"][1] == T2


def test_a_histogram_keeps_one_counter_per_bucket_and_reads_back_cumulative():
    histogram = Histogram(name="lateness", bounds=(1.0, 60.0))
    for milliseconds in (0, 1000, 1001, 60_000, 61_000):
        histogram.observe(milliseconds)

    totals = histogram.totals()

    assert totals == {
        "lateness_le_1": 2,
        "lateness_le_60": 2,
        "lateness_le_inf": 1,
        "lateness_sum_ms": 123_001,
    }
    assert list(histogram.cumulative(totals)) == [("1", 2), ("60", 4), ("+Inf", 5)]
