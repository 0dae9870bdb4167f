"""One meaning per worker outcome in both queues: each path of run_tick and consume_jobs
is counted under its own label on /metrics, and no label is used for two things."""

from datetime import UTC, datetime

import pytest

from dbqueue.clock import Clock
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from jobs.consumer import jobs_drain
from jobs.registry import HANDLERS, Handler, JobError
from outbound.categories import ErrorCategory
from tests.delivery.factories import make_endpoint, make_notification
from tests.jobs.factories import NOW, make_job
from tests.operations.test_metrics import samples

DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
TICK_OUTCOMES = ("delivered", "partial", "backed_off", "deferred", "released", "dead_lettered")
JOB_OUTCOMES = ("completed", "backed_off", "deferred", "dead_lettered", "fenced_out")


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_ENABLED = True
    settings.METRICS_TOKEN = ""
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    settings.PROVISIONING_URL = ""
    return settings


def _outcomes(client, worker: str, names: tuple[str, ...]) -> dict[str, float]:
    figures = samples(client.get("/metrics"))
    return {
        name: figures[f'tickwork_worker_outcomes_total{{outcome="{name}",worker="{worker}"}}']
        for name in names
    }


def _only(outcome: str, names: tuple[str, ...]) -> dict[str, float]:
    return {name: float(name == outcome) for name in names}


@pytest.mark.parametrize(
    ("result", "error_count", "outcome"),
    [
        (DeliveryResult(ok=True, http_status=200), 0, "delivered"),
        (
            DeliveryResult(ok=False, http_status=500, category=ErrorCategory.HTTP_5XX),
            0,
            "backed_off",
        ),
        (
            DeliveryResult(ok=False, http_status=500, category=ErrorCategory.HTTP_5XX),
            2,
            "dead_lettered",
        ),
        (
            DeliveryResult(
                ok=False,
                http_status=429,
                category=ErrorCategory.RATE_LIMITED,
                retry_after=30,
                backpressure=True,
            ),
            0,
            "deferred",
        ),
    ],
)
def test_each_tick_path_is_counted_under_its_own_label(
    client, alice, metrics_on, result, error_count, outcome
):
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    make_notification(
        tenant=alice.tenant, endpoint=endpoint, next_fire_at=DUE, error_count=error_count
    )

    run_tick(now=DUE, senders=Senders(email=None, webhook=lambda message, *, timeout: result))

    assert _outcomes(client, "run_tick", TICK_OUTCOMES) == _only(outcome, TICK_OUTCOMES)


@pytest.fixture
def kinds(monkeypatch):
    """`flaky` fails with a transient error; `busy` is told "later" by its provider."""

    def flaky(job):
        raise JobError("upstream answered HTTP 503", category=ErrorCategory.HTTP_5XX)

    def busy(job):
        raise JobError(
            "HTTP 429", category=ErrorCategory.RATE_LIMITED, retry_after=30, backpressure=True
        )

    noop = lambda job, now: None  # noqa: E731
    monkeypatch.setitem(HANDLERS, "flaky", Handler(perform=flaky, apply=noop))
    monkeypatch.setitem(HANDLERS, "busy", Handler(perform=busy, apply=noop))


@pytest.mark.parametrize(
    ("kind", "fields", "outcome"),
    [
        ("provision", {}, "completed"),
        ("flaky", {}, "backed_off"),
        ("flaky", {"attempts": 4}, "dead_lettered"),
        ("no-such-kind", {}, "dead_lettered"),
        ("busy", {}, "deferred"),
    ],
)
def test_each_consumer_path_is_counted_under_its_own_label(
    client, alice, metrics_on, kinds, kind, fields, outcome
):
    make_job(alice.tenant, kind=kind, **fields)

    jobs_drain(clock=Clock(now=NOW), limit=10, max_seconds=60)

    assert _outcomes(client, "consume_jobs", JOB_OUTCOMES) == _only(outcome, JOB_OUTCOMES)
