"""The admin's "Queue health" page: what `queue_status` and `/metrics` report, for support
staff without a Prometheus, with a chart of the delivery log's last 24 hours."""

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.safestring import mark_safe

from dbqueue.clock import database_now
from delivery.models import DeliveryOutcome
from operations.charts import Series, lines_svg, stacked_bars_svg
from operations.queue_health import HourlyLateness, HourlyOutcomes, queue_health

OUTCOME_COLORS = {
    DeliveryOutcome.DELIVERED: "#2e7d32",
    DeliveryOutcome.FAILED: "#ef6c00",
    DeliveryOutcome.TIMEOUT: "#f9a825",
    DeliveryOutcome.DEFERRED: "#78909c",
    DeliveryOutcome.SKIPPED: "#8e24aa",
    DeliveryOutcome.DEAD_LETTERED: "#c62828",
    DeliveryOutcome.SUPPRESSED: "#5c6bc0",
}


def queue_health_view(request: HttpRequest) -> TemplateResponse:
    """Staff only: registered through `admin.site.admin_view` (see operations/admin.py)."""
    now = database_now()
    health = queue_health(now=now)
    totals = health.deliveries.totals()
    context = {
        **admin.site.each_context(request),
        "title": "Queue health",
        "now": now,
        "notifications": health.notifications,
        "jobs": health.jobs,
        "delivery_totals": [
            (OUTCOME_COLORS[outcome], outcome.label, totals[outcome.value])
            for outcome in DeliveryOutcome
        ],
        "deliveries_chart": _deliveries_chart(health.deliveries),
        "lateness_chart": _lateness_chart(health.lateness),
        "near_limits": health.near_limits,
    }
    return TemplateResponse(request, "admin/operations/queue_health.html", context)


def _deliveries_chart(deliveries: HourlyOutcomes) -> str:
    svg = stacked_bars_svg(
        labels=[hour.strftime("%H:00") for hour in deliveries.hours],
        values=deliveries.counts,
        series=[Series(o.value, o.label, OUTCOME_COLORS[o]) for o in DeliveryOutcome],
        title="Deliveries per hour by outcome, last 24 hours (UTC)",
    )
    # Built from numbers and escaped labels only (operations.charts).
    return mark_safe(svg)  # noqa: S308


def _lateness_chart(lateness: HourlyLateness) -> str:
    svg = lines_svg(
        labels=[hour.strftime("%H:00") for hour in lateness.hours],
        values=lateness.quantiles,
        series=[Series("p50", "p50 (s)", "#1565c0"), Series("p99", "p99 (s)", "#c62828")],
        title="Lateness per hour, p50 and p99 in seconds, last 24 hours (UTC)",
    )
    # Built from numbers and fixed labels only (operations.charts).
    return mark_safe(svg)  # noqa: S308
