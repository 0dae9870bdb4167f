"""The shipped Grafana dashboard and Prometheus alert rules parse and use only the series
GET /metrics serves, and the dashboard graphs every one of them."""

import json
import re
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from delivery.scheduler.context import LATENESS_BOUNDS_S
from operations.metrics import metrics_exposition

MONITORING = Path(__file__).resolve().parents[2] / "operations" / "monitoring"
SERIES = re.compile(r"\btickwork_[a-z_]+")
REQUIRED_ALERTS = {
    "TickworkSchedulerNotTicking",
    "TickworkDeliveriesLate",
    "TickworkOldestDueAgeHigh",
    "TickworkNotificationDeadLettersRising",
    "TickworkJobDeadLettersRising",
    "TickworkWebhookCircuitsOpen",
}


@pytest.fixture
def served_series(db) -> set[str]:
    exposition = metrics_exposition(now=timezone.now())
    return set(re.findall(r"^# TYPE (\S+) ", exposition, re.MULTILINE))


def _rules() -> list[dict]:
    document = yaml.safe_load((MONITORING / "prometheus" / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _families(names: set[str], served: set[str]) -> set[str]:
    """A histogram's _bucket/_sum/_count series belong to its family."""
    return {
        family if (family := re.sub(r"_(bucket|sum|count)$", "", name)) in served else name
        for name in names
    }


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana" / "tickwork.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_alert_rules_are_complete(served_series):
    rules = _rules()

    assert {rule["alert"] for rule in rules} == REQUIRED_ALERTS
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
        assert _families(set(SERIES.findall(rule["expr"])), served_series) <= served_series


def test_the_scheduler_alert_reads_run_ticks_last_run():
    scheduler = next(r for r in _rules() if r["alert"] == "TickworkSchedulerNotTicking")

    assert 'tickwork_worker_last_run_timestamp_seconds{worker="run_tick"}' in scheduler["expr"]


def test_the_dashboard_graphs_every_served_series(served_series):
    used = {name for expr in _dashboard_expressions() for name in SERIES.findall(expr)}
    used = _families(used, served_series)

    assert used == served_series


def test_the_late_deliveries_alert_fires_at_an_edge_of_the_lateness_bands():
    late = next(r for r in _rules() if r["alert"] == "TickworkDeliveriesLate")

    quantile = re.fullmatch(
        r"histogram_quantile\(0\.99, sum by \(le\) \(rate\("
        r"tickwork_delivery_lateness_seconds_bucket\[\w+\]\)\)\)\s*>\s*([\d.]+)",
        late["expr"].strip(),
    )
    assert quantile is not None, late["expr"]
    assert float(quantile.group(1)) in LATENESS_BOUNDS_S


def test_the_metrics_histogram_buckets_are_the_lateness_bands(db):
    exposition = metrics_exposition(now=timezone.now())

    edges = re.findall(
        r'^tickwork_delivery_lateness_seconds_bucket\{le="([^"]+)"\}', exposition, re.M
    )
    assert edges == [f"{bound:g}" for bound in LATENESS_BOUNDS_S] + ["+Inf"]
