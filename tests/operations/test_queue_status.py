"""queue_status: the figures of both queues, as a table or one JSON object."""

import io
import json
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from delivery.models import WebhookEndpoint
from delivery.stats import endpoint_circuit_stats, notification_queue_stats
from jobs.stats import job_queue_stats
from tenancy.models import Tenant
from tests.jobs.factories import NOW
from tests.support.queues import fill_queues


def test_job_figures(alice, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    fill_queues(alice.tenant, now=NOW)

    assert job_queue_stats(now=NOW) == {
        "pending": 2,
        "in_flight": 1,
        "dead_lettered": 1,
        "oldest_pending_age_seconds": 300,
    }


def test_notification_figures(alice, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    fill_queues(alice.tenant, now=NOW)

    assert notification_queue_stats(now=NOW) == {
        "due": 2,
        "oldest_due_age_seconds": 90,
        "backing_off": 1,
        "oldest_backing_off_age_seconds": 240,
        "dead_lettered": 1,
        "in_flight": 1,
    }


def test_empty_queues_report_zeros(db):
    assert job_queue_stats(now=NOW)["oldest_pending_age_seconds"] == 0
    assert notification_queue_stats(now=NOW)["oldest_due_age_seconds"] == 0
    assert notification_queue_stats(now=NOW)["oldest_backing_off_age_seconds"] == 0


def test_json_output_is_one_object_with_both_queues(alice, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    fill_queues(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("queue_status", "--json", stdout=out)

    figures = json.loads(out.getvalue())
    assert set(figures) == {"notifications", "jobs"}
    assert set(figures["notifications"]) == {
        "due",
        "oldest_due_age_seconds",
        "backing_off",
        "oldest_backing_off_age_seconds",
        "dead_lettered",
        "in_flight",
        "open_circuits",
        "failing_endpoints",
        "disabled_endpoints",
    }
    assert figures["notifications"]["oldest_backing_off_age_seconds"] >= 240
    assert figures["jobs"]["pending"] == 2
    assert figures["jobs"]["dead_lettered"] == 1
    assert figures["jobs"]["oldest_pending_age_seconds"] >= 300
    assert figures["notifications"]["due"] == 2
    assert figures["notifications"]["dead_lettered"] == 1


def test_the_table_names_every_figure(db):
    out = io.StringIO()

    call_command("queue_status", stdout=out)

    text = out.getvalue()
    names = ("notifications", "jobs", "due", "backing_off", "pending", "in_flight")
    for name in (*names, "oldest_due_age_seconds", "oldest_backing_off_age_seconds"):
        assert name in text


def test_endpoint_circuits_are_counted(db):
    tenant = Tenant.objects.create(name="T")
    for failures, open_until in [
        (0, None),
        (2, None),
        (5, NOW + timedelta(minutes=1)),
        (5, NOW - timedelta(seconds=1)),  # half-open: failing, no longer open
    ]:
        WebhookEndpoint.objects.create(
            tenant=tenant,
            url="https://example.com/hook",
            secret="whsec_x",
            consecutive_failures=failures,
            circuit_open_until=open_until,
        )

    WebhookEndpoint.objects.create(
        tenant=tenant, url="https://example.com/off", secret="whsec_x", enabled=False
    )

    assert endpoint_circuit_stats(now=NOW) == {
        "open_circuits": 1,
        "failing_endpoints": 2,
        "disabled_endpoints": 1,
    }
