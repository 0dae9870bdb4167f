"""GET /metrics: off by default, optionally token-protected, a valid Prometheus text
exposition of both queues and of the workers' cumulative counters."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dbqueue.totals import worker_totals_add
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.queues import fill_queues

LABEL = r'[a-z_]+="[a-z_0-9.+A-Za-z]+"'
# A value as Go prints a float (prometheus_client writes 5.0, 1.7672256e+09, +Inf).
SAMPLE = re.compile(rf"^[a-z_]+(\{{{LABEL}(,{LABEL})*\}})? (-?\d+(\.\d+)?(e[+-]\d+)?|[+-]Inf|NaN)$")


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_ENABLED = True
    settings.METRICS_TOKEN = ""
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    return settings


def samples(response) -> dict[str, float]:
    """{'name{labels}': value} for every sample (labels in name order, as prometheus_client
    writes them); fails on any malformed line."""
    found = {}
    for line in response.content.decode().splitlines():
        if line.startswith("# "):
            assert re.fullmatch(r"# (HELP [a-z_]+ .+|TYPE [a-z_]+ (gauge|counter|histogram))", line)
            continue
        assert SAMPLE.fullmatch(line), line
        series, value = line.rsplit(" ", 1)
        found[series] = float(value)
    return found


def test_off_by_default_it_is_a_404_problem(client, db):
    response = client.get("/metrics")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_exposes_both_queues_and_the_worker_counters(client, alice, metrics_on):
    fill_queues(alice.tenant, now=timezone.now())
    worker_totals_add(
        "run_tick",
        {"claimed": 5, "delivered": 4, "dead_lettered": 1},
        now=datetime(2026, 1, 1, tzinfo=UTC),
    )
    worker_totals_add("run_tick", {"claimed": 2, "delivered": 2}, now=timezone.now())
    worker_totals_add("consume_jobs", {"claimed": 1, "completed": 1}, now=timezone.now())

    response = client.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    figures = samples(response)
    assert figures['tickwork_notifications{state="due"}'] == 2
    assert figures['tickwork_notifications{state="backing_off"}'] == 1
    assert figures['tickwork_notifications{state="dead_lettered"}'] == 1
    assert figures['tickwork_notifications{state="in_flight"}'] == 1
    assert 90 <= figures["tickwork_notifications_oldest_due_age_seconds"] < 150
    assert 240 <= figures["tickwork_notifications_oldest_backing_off_age_seconds"] < 300
    assert figures['tickwork_jobs{status="pending"}'] == 2
    assert figures['tickwork_jobs{status="in_flight"}'] == 1
    assert figures['tickwork_jobs{status="dead_lettered"}'] == 1
    assert 300 <= figures["tickwork_jobs_oldest_pending_age_seconds"] < 360
    assert figures["tickwork_webhook_circuits_open"] == 0
    assert figures["tickwork_webhook_endpoints_failing"] == 0
    assert figures['tickwork_worker_runs_total{worker="run_tick"}'] == 2
    assert figures['tickwork_worker_claimed_total{worker="run_tick"}'] == 7
    assert figures['tickwork_worker_outcomes_total{outcome="delivered",worker="run_tick"}'] == 6
    assert figures['tickwork_worker_outcomes_total{outcome="dead_lettered",worker="run_tick"}'] == 1
    assert figures['tickwork_worker_outcomes_total{outcome="fenced_out",worker="run_tick"}'] == 0
    assert figures['tickwork_worker_outcomes_total{outcome="completed",worker="consume_jobs"}'] == 1
    last_tick = figures['tickwork_worker_last_run_timestamp_seconds{worker="run_tick"}']
    assert abs(last_tick - timezone.now().timestamp()) < 60


def test_counters_exist_at_zero_before_any_worker_ran(client, db, metrics_on):
    figures = samples(client.get("/metrics"))

    assert figures['tickwork_worker_runs_total{worker="consume_jobs"}'] == 0
    for worker, outcome in [
        ("consume_jobs", "backed_off"),
        ("consume_jobs", "dead_lettered"),
        ("run_tick", "backed_off"),
        ("run_tick", "dead_lettered"),
    ]:
        assert (
            figures[f'tickwork_worker_outcomes_total{{outcome="{outcome}",worker="{worker}"}}'] == 0
        )
    assert not any('outcome="failed"' in name or 'outcome="retried"' in name for name in figures)
    assert not any(name.startswith("tickwork_worker_last_run") for name in figures)


def test_no_tenant_identifier_is_exposed(client, alice, metrics_on):
    fill_queues(alice.tenant, now=timezone.now())

    assert str(alice.tenant.id) not in client.get("/metrics").content.decode()


@pytest.mark.parametrize(
    ("authorization", "status"),
    [(None, 401), ("Bearer wrong", 401), ("Basic c2VjcmV0", 401), ("Bearer s3cret-scrape", 200)],
)
def test_a_configured_token_is_required(client, db, metrics_on, authorization, status):
    metrics_on.METRICS_TOKEN = "s3cret-scrape"
    headers = {"Authorization": authorization} if authorization else {}

    response = client.get("/metrics", headers=headers)

    assert response.status_code == status
    if status == 401:
        assert response["WWW-Authenticate"] == "Bearer"
        assert "s3cret-scrape" not in response.content.decode()


def test_other_methods_are_405(client, db, metrics_on):
    response = client.post("/metrics")

    assert response.status_code == 405
    assert response["Allow"] == "GET"


def test_a_tick_s_lateness_skips_and_leftovers_are_exposed(client, alice, metrics_on):
    due = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    for late in (0, 10, 200):
        make_notification(
            tenant=alice.tenant, endpoint=endpoint, next_fire_at=due - timedelta(seconds=late)
        )
    make_notification(
        tenant=alice.tenant,
        endpoint=endpoint,
        next_fire_at=due - timedelta(minutes=5),
        rrule="FREQ=MINUTELY",
    )
    ok = lambda message, *, timeout: DeliveryResult(ok=True, http_status=200)  # noqa: E731
    run_tick(now=due, senders=Senders(email=ok, webhook=ok))
    worker_totals_add("run_tick", {}, gauges={"due_left": 17}, now=due)

    figures = samples(client.get("/metrics"))

    histogram = "tickwork_delivery_lateness_seconds"
    assert [figures[f'{histogram}_bucket{{le="{le}"}}'] for le in ("1", "5", "15", "300")] == [
        1,
        1,
        2,
        4,
    ]
    assert figures[f'{histogram}_bucket{{le="+Inf"}}'] == figures[f"{histogram}_count"] == 4
    assert figures[f"{histogram}_sum"] == 510.0
    assert figures["tickwork_occurrences_skipped_total"] == 5
    assert figures["tickwork_tick_due_left"] == 17


def test_lateness_series_exist_at_zero_before_any_tick(client, db, metrics_on):
    figures = samples(client.get("/metrics"))

    assert figures['tickwork_delivery_lateness_seconds_bucket{le="+Inf"}'] == 0
    assert figures["tickwork_delivery_lateness_seconds_sum"] == 0
    assert figures["tickwork_occurrences_skipped_total"] == 0
    assert figures["tickwork_tick_due_left"] == 0
