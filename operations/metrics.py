"""GET /metrics: Prometheus text exposition of both queues and the workers' counters.

prometheus_client renders it: a registry holding one custom collector, which reads every
series from the database when it is collected (nothing is counted in this process).

Off unless METRICS_ENABLED; when METRICS_TOKEN is set, scrapers must send it as a bearer
token. Figures are read from the database at scrape time, so every web process answers the
same, whichever worker processes (cron or --loop) did the work. Nothing tenant-specific
is exposed: only totals over all tenants."""

import hmac
from collections.abc import Iterator, Mapping
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

from dbqueue.clock import database_now
from dbqueue.totals import worker_totals
from delivery.scheduler.context import lateness_histogram
from delivery.stats import endpoint_circuit_stats, notification_queue_stats
from jobs.stats import job_queue_stats
from tenancy.plans import COUNTED, PERIODIC
from tenancy.quotas import NEAR, limit_uses
from web.problems import problem_response

# The text format generate_latest writes (0.0.4).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# Every counter a worker reports, so each series exists (at 0) before its first increment.
# An outcome means the same in both queues: backed_off (a failed attempt, tried again
# later), deferred (the other side said "later": no attempt used), dead_lettered (given up),
# fenced_out (dropped: reclaimed after the lease ran out). delivered and partial are the
# scheduler's completions, suppressed its rows finished without a send (every channel kept
# back by a recipient's preference), released its rows given back unattempted, errors its
# rows whose processing raised; completed is a job's.
WORKER_OUTCOMES = {
    "run_tick": (
        "delivered",
        "partial",
        "backed_off",
        "deferred",
        "released",
        "dead_lettered",
        "suppressed",
        "fenced_out",
        "errors",
    ),
    "consume_jobs": ("completed", "backed_off", "deferred", "dead_lettered", "fenced_out"),
}


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        return problem_response(404, "No resource matches this URL.")
    if settings.METRICS_TOKEN and not _bearer_matches(request, settings.METRICS_TOKEN):
        return problem_response(
            401, "A valid metrics token is required.", headers={"WWW-Authenticate": "Bearer"}
        )
    try:
        text = metrics_exposition(now=database_now())
    except DatabaseError:
        return problem_response(503, "The database is unreachable.")
    return HttpResponse(text, content_type=CONTENT_TYPE)


def _bearer_matches(request: HttpRequest, token: str) -> bool:
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode(), token.encode()
    )


def metrics_exposition(*, now: datetime) -> str:
    """The whole exposition: queue gauges, then the workers' cumulative counters."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(now=now))
    return generate_latest(registry).decode()


class QueueCollector(Collector):
    """Every series of /metrics, read from the database as of `now` when collected."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        yield from _notification_families(self.now)
        yield from _job_and_circuit_families(self.now)
        yield from _worker_families(worker_totals())
        yield from _plan_families(self.now)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def _notification_families(now: datetime) -> Iterator[Metric]:
    notifications = notification_queue_stats(now=now)
    family = GaugeMetricFamily(
        "tickwork_notifications",
        "Notifications by queue state (due: claimable now; in_flight: leased by a tick).",
        labels=["state"],
    )
    for state in ("due", "backing_off", "dead_lettered", "in_flight"):
        family.add_metric([state], notifications[state])
    yield family
    yield _gauge(
        "tickwork_notifications_oldest_due_age_seconds",
        "How late the most overdue claimable notification is.",
        notifications["oldest_due_age_seconds"],
    )
    yield _gauge(
        "tickwork_notifications_oldest_backing_off_age_seconds",
        "How long the oldest occurrence being retried has been outstanding since it was due.",
        notifications["oldest_backing_off_age_seconds"],
    )


def _job_and_circuit_families(now: datetime) -> Iterator[Metric]:
    jobs = job_queue_stats(now=now)
    family = GaugeMetricFamily(
        "tickwork_jobs",
        "Jobs by status (dead_lettered: waiting for a retry).",
        labels=["status"],
    )
    for status in ("pending", "in_flight", "dead_lettered"):
        family.add_metric([status], jobs[status])
    yield family
    yield _gauge(
        "tickwork_jobs_oldest_pending_age_seconds",
        "Age of the oldest pending job.",
        jobs["oldest_pending_age_seconds"],
    )
    circuits = endpoint_circuit_stats(now=now)
    yield _gauge(
        "tickwork_webhook_circuits_open",
        "Webhook endpoints whose circuit is open: their deliveries wait, unattempted.",
        circuits["open_circuits"],
    )
    yield _gauge(
        "tickwork_webhook_endpoints_failing",
        "Webhook endpoints with consecutive transport failures and a closed circuit.",
        circuits["failing_endpoints"],
    )


def _worker_families(totals: dict[str, dict[str, tuple[int, datetime]]]) -> Iterator[Metric]:
    def total(worker: str, name: str) -> int:
        return totals.get(worker, {}).get(name, (0, None))[0]

    runs = CounterMetricFamily(
        "tickwork_worker_runs_total",
        "Ticks run by run_tick; batches that claimed work for consume_jobs.",
        labels=["worker"],
    )
    claimed = CounterMetricFamily(
        "tickwork_worker_claimed_total",
        "Rows (notifications or jobs) claimed by each worker.",
        labels=["worker"],
    )
    outcomes = CounterMetricFamily(
        "tickwork_worker_outcomes_total",
        "Claimed rows by the outcome the worker wrote back, one meaning in both queues "
        "(backed_off: retried later; dead_lettered: given up; fenced_out: dropped, reclaimed).",
        labels=["worker", "outcome"],
    )
    last_run = GaugeMetricFamily(
        "tickwork_worker_last_run_timestamp_seconds",
        "When the worker last finished a tick (run_tick) or a batch with work (consume_jobs).",
        labels=["worker"],
    )
    for worker, names in WORKER_OUTCOMES.items():
        runs.add_metric([worker], total(worker, "runs"))
        claimed.add_metric([worker], total(worker, "claimed"))
        for outcome in names:
            outcomes.add_metric([worker, outcome], total(worker, outcome))
        if "runs" in totals.get(worker, {}):
            last_run.add_metric([worker], round(totals[worker]["runs"][1].timestamp(), 3))
    yield runs
    yield claimed
    yield outcomes
    yield from _tick_families(
        {name: value for name, (value, _) in totals.get("run_tick", {}).items()}
    )
    yield last_run


def _tick_families(totals: Mapping[str, int]) -> Iterator[Metric]:
    """Whether the scheduler keeps up: the lateness of its attempts, the occurrences it
    skipped, and what the last tick left due. `totals` are run_tick's, {name: total}."""
    histogram = lateness_histogram()
    yield HistogramMetricFamily(
        "tickwork_delivery_lateness_seconds",
        "How late channel attempts were: attempted_at minus the due time.",
        buckets=list(histogram.cumulative(totals)),
        sum_value=totals.get(f"{histogram.name}_sum_ms", 0) / 1000,
    )
    yield CounterMetricFamily(
        "tickwork_occurrences_skipped_total",
        "Occurrences of recurring notifications skipped because they were handled late.",
        value=totals.get("skipped", 0),
    )
    yield _gauge(
        "tickwork_tick_due_left",
        "Due notifications left when the last tick stopped (0 when it emptied the queue).",
        totals.get("due_left", 0),
    )


def _plan_families(now: datetime) -> Iterator[Metric]:
    """Per limit, never per tenant (the label set stays bounded): the highest share of a
    limit any tenant uses, and how many tenants use 80% of it or more."""
    uses = limit_uses(now=now)
    fullest = GaugeMetricFamily(
        "tickwork_plan_usage_ratio",
        "The highest use / limit of any tenant's plan limit this period (0 when none is set).",
        labels=["limit"],
    )
    near = GaugeMetricFamily(
        "tickwork_plan_tenants_near_limit",
        f"Tenants using at least {NEAR:.0%} of this limit of their plan.",
        labels=["limit"],
    )
    for name in PERIODIC + COUNTED:
        ratios = [use.ratio for use in uses if use.name == name]
        fullest.add_metric([name], max(ratios, default=0.0))
        near.add_metric([name], sum(ratio >= NEAR for ratio in ratios))
    yield fullest
    yield near
