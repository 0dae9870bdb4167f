"""An email a recipient's preference keeps from sending is `suppressed`: its own outcome in
the delivery log (with its reason), in the tick's summary and in /metrics, never counted
as a delivery, and never spelled `skipped` (the occurrences a late recurring row jumped
over)."""

from datetime import UTC, datetime

import pytest
from django.core import mail

from delivery.models import Delivery
from delivery.scheduler.tick import run_tick
from notifications.services import notification_create
from people.recipients import preferences_put, recipient_put
from tests.support.fake_resend import fake_resend

NOW = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)


@pytest.fixture
def opted_out(alice):
    tenant = alice.tenant
    recipient_put(tenant=tenant, key="ada", email="ada@example.com", now=NOW)
    preferences_put(tenant=tenant, key="ada", preferences={"channels": {"email": False}}, now=NOW)
    return notification_create(
        tenant=tenant,
        channels=["email"],
        subject="News",
        body="Read it.",
        recipients=["ada"],
        category="news",
        now=NOW,
    )


def test_the_log_the_summary_and_metrics_call_it_suppressed(
    client, alice, opted_out, local_mail, settings
):
    settings.METRICS_ENABLED, settings.METRICS_TOKEN = True, ""

    summary = run_tick(now=NOW)

    assert mail.outbox == []
    assert (summary.suppressed, summary.delivered, summary.skipped) == (1, 0, 0)
    [log] = Delivery.objects.filter(notification_id=opted_out.pk)
    assert (log.outcome, log.error_category, log.error) == (
        "suppressed",
        "preference",
        "not sent: preference",
    )
    metrics = client.get("/metrics").content.decode()
    assert 'tickwork_worker_outcomes_total{outcome="suppressed",worker="run_tick"} 1.0' in metrics
    assert 'tickwork_worker_outcomes_total{outcome="delivered",worker="run_tick"} 0.0' in metrics


def test_the_deliveries_api_lists_and_filters_it(alice, opted_out, local_mail):
    run_tick(now=NOW)

    response = alice.client().get("/v1/deliveries?outcome=suppressed")

    assert response.status_code == 200
    [row] = response.json()["results"]
    assert (row["outcome"], row["error_category"], row["skipped"]) == (
        "suppressed",
        "preference",
        None,
    )
    assert alice.client().get("/v1/deliveries?outcome=skipped").json()["results"] == []


def test_through_resend_too_nothing_is_sent_and_it_is_counted_suppressed(
    alice, opted_out, settings
):
    with fake_resend(rate=10) as resend:
        settings.RESEND_API_KEY, settings.RESEND_API_URL = resend.api_key, resend.url

        summary = run_tick()

    assert resend.sent == []
    assert (summary.suppressed, summary.delivered) == (1, 0)
    assert Delivery.objects.get(notification_id=opted_out.pk).outcome == "suppressed"
