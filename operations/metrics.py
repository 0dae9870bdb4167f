"""GET /metrics: Prometheus text exposition of both queues and the workers' counters.

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

from dbqueue.clock import database_now
from dbqueue.totals import worker_totals
from jobs.stats import job_queue_stats
from notifications.scheduler.context import lateness_histogram
from notifications.stats import endpoint_circuit_stats, notification_queue_stats
from web.problems import problem_response

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Every counter a worker reports, so each series exists (at 0) before its first increment.
WORKER_OUTCOMES = {
    "run_tick": (
        "delivered",
        "partial",
        "failed",
        "deferred",
        "released",
        "dead_lettered",
        "fenced_out",
        "errors",
    ),
    "consume_jobs": ("completed", "retried", "deferred", "failed", "fenced_out"),
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
    return "".join(_lines(now))


def _lines(now: datetime) -> Iterator[str]:
    notifications = notification_queue_stats(now=now)
    yield from _family(
        "tickwork_notifications",
        "gauge",
        "Notifications by queue state (due: claimable now; in_flight: leased by a tick).",
        [
            ({"state": state}, notifications[state])
            for state in ("due", "backing_off", "dead_lettered", "in_flight")
        ],
    )
    yield from _family(
        "tickwork_notifications_oldest_due_age_seconds",
        "gauge",
        "How late the most overdue claimable notification is.",
        [({}, notifications["oldest_due_age_seconds"])],
    )
    yield from _family(
        "tickwork_notifications_oldest_backing_off_age_seconds",
        "gauge",
        "How long the oldest occurrence being retried has been outstanding since it was due.",
        [({}, notifications["oldest_backing_off_age_seconds"])],
    )
    yield from _job_and_circuit_families(now)
    yield from _worker_families(worker_totals())


def _job_and_circuit_families(now: datetime) -> Iterator[str]:
    jobs = job_queue_stats(now=now)
    yield from _family(
        "tickwork_jobs",
        "gauge",
        "Jobs by status (failed: dead-lettered, waiting for a retry).",
        [({"status": status}, jobs[status]) for status in ("pending", "in_flight", "failed")],
    )
    yield from _family(
        "tickwork_jobs_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending job.",
        [({}, jobs["oldest_pending_age_seconds"])],
    )
    circuits = endpoint_circuit_stats(now=now)
    yield from _family(
        "tickwork_webhook_circuits_open",
        "gauge",
        "Webhook endpoints whose circuit is open: their deliveries wait, unattempted.",
        [({}, circuits["open_circuits"])],
    )
    yield from _family(
        "tickwork_webhook_endpoints_failing",
        "gauge",
        "Webhook endpoints with consecutive transport failures and a closed circuit.",
        [({}, circuits["failing_endpoints"])],
    )


def _worker_families(totals: dict[str, dict[str, tuple[int, datetime]]]) -> Iterator[str]:
    def total(worker: str, name: str) -> int:
        return totals.get(worker, {}).get(name, (0, None))[0]

    yield from _family(
        "tickwork_worker_runs_total",
        "counter",
        "Ticks run by run_tick; batches that claimed work for consume_jobs.",
        [({"worker": worker}, total(worker, "runs")) for worker in WORKER_OUTCOMES],
    )
    yield from _family(
        "tickwork_worker_claimed_total",
        "counter",
        "Rows (notifications or jobs) claimed by each worker.",
        [({"worker": worker}, total(worker, "claimed")) for worker in WORKER_OUTCOMES],
    )
    yield from _family(
        "tickwork_worker_outcomes_total",
        "counter",
        "Claimed rows by the outcome the worker wrote back (fenced_out: dropped, reclaimed).",
        [
            ({"worker": worker, "outcome": outcome}, total(worker, outcome))
            for worker, outcomes in WORKER_OUTCOMES.items()
            for outcome in outcomes
        ],
    )
    yield from _tick_families(
        {name: value for name, (value, _) in totals.get("run_tick", {}).items()}
    )
    last_runs = [
        ({"worker": worker}, round(totals[worker]["runs"][1].timestamp(), 3))
        for worker in WORKER_OUTCOMES
        if "runs" in totals.get(worker, {})
    ]
    yield from _family(
        "tickwork_worker_last_run_timestamp_seconds",
        "gauge",
        "When the worker last finished a tick (run_tick) or a batch with work (consume_jobs).",
        last_runs,
    )


def _tick_families(totals: Mapping[str, int]) -> Iterator[str]:
    """Whether the scheduler keeps up: the lateness of its attempts, the occurrences it
    skipped, and what the last tick left due. `totals` are run_tick's, {name: total}."""
    name = "tickwork_delivery_lateness_seconds"
    histogram = lateness_histogram()
    buckets = list(histogram.cumulative(totals))
    yield f"# HELP {name} How late channel attempts were: attempted_at minus the due time.\n"
    yield f"# TYPE {name} histogram\n"
    for le, count in buckets:
        yield f'{name}_bucket{{le="{le}"}} {count}\n'
    yield f"{name}_sum {totals.get(f'{histogram.name}_sum_ms', 0) / 1000}\n"
    yield f"{name}_count {buckets[-1][1]}\n"
    yield from _family(
        "tickwork_occurrences_skipped_total",
        "counter",
        "Occurrences of recurring notifications skipped because they were handled late.",
        [({}, totals.get("skipped", 0))],
    )
    yield from _family(
        "tickwork_tick_due_left",
        "gauge",
        "Due notifications left when the last tick stopped (0 when it emptied the queue).",
        [({}, totals.get("due_left", 0))],
    )


def _family(
    name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]
) -> Iterator[str]:
    yield f"# HELP {name} {help_text}\n"
    yield f"# TYPE {name} {kind}\n"
    for labels, value in samples:
        rendered = ",".join(f'{key}="{label}"' for key, label in labels.items())
        yield f"{name}{{{rendered}}} {value}\n" if rendered else f"{name} {value}\n"
