"""A tick drains what is due; a slow or dead webhook endpoint costs nobody else anything:
per-endpoint slots, the circuit breaker in the database, per-channel deferral."""

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, Notification, WebhookEndpoint
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
DEAD = "https://dead.example.com/hook"
HEALTHY = "https://ok.example.com/hook"


class FakeChannels:
    """Channel senders that answer at once: a timeout for DEAD, 200 otherwise; they count
    calls per URL and the most calls in flight at once per URL."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.emails = 0
        self.most_in_flight: Counter = Counter()
        self._in_flight: Counter = Counter()
        self._lock = threading.Lock()

    def webhook(self, message, *, timeout):
        with self._lock:
            self.calls[message.url] += 1
            self._in_flight[message.url] += 1
            self.most_in_flight[message.url] = max(
                self.most_in_flight[message.url], self._in_flight[message.url]
            )
        time.sleep(0.002)  # long enough for calls to overlap; no assertion depends on it
        with self._lock:
            self._in_flight[message.url] -= 1
        if message.url == DEAD:
            return DeliveryResult(ok=False, error="timed out", category="timeout")
        return DeliveryResult(ok=True, http_status=200)

    def email(self, message, *, timeout):
        with self._lock:
            self.emails += 1
        return DeliveryResult(ok=True, http_status=200)

    @property
    def senders(self) -> Senders:
        return Senders(email=self.email, webhook=self.webhook)


@pytest.fixture
def channels() -> FakeChannels:
    return FakeChannels()


def test_a_tick_drains_every_due_row_in_batches(db, settings, channels):
    settings.TICK_LIMIT = 10
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(95, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, senders=channels.senders)

    # Rows beyond the endpoint's free slots went back unattempted and were claimed again.
    assert summary.delivered == 95
    assert summary.claimed == 95 + summary.released
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert channels.calls[HEALTHY] == 95


def test_max_rows_caps_a_tick(db, settings, channels):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 16
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(30, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, max_rows=12, senders=channels.senders)

    assert summary.claimed == summary.delivered == 12
    assert Notification.objects.exclude(state="completed").count() == 18


def test_one_endpoint_never_has_more_deliveries_in_flight_than_its_slots(db, settings, channels):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 3
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(60, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, concurrency=16, senders=channels.senders)

    assert channels.most_in_flight[HEALTHY] <= 3
    assert channels.calls[HEALTHY] == 60
    assert summary.delivered == 60
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_a_dead_endpoint_opens_its_circuit_and_its_rows_wait_unattempted(db, settings, channels):
    settings.WEBHOOK_CIRCUIT_FAILURES = 5
    dead_tenant, healthy_tenant = make_tenant("dead"), make_tenant("healthy")
    dead = make_endpoint(tenant=dead_tenant, url=DEAD)
    healthy = make_endpoint(tenant=healthy_tenant, url=HEALTHY)
    make_notifications(40, tenant=dead_tenant, endpoint=dead, next_fire_at=NOW)
    make_notifications(10, tenant=healthy_tenant, endpoint=healthy, next_fire_at=NOW)

    summary = run_tick(now=NOW, senders=channels.senders)

    # The fifth failure opens it; at most the slots' worth were already on their way.
    assert channels.calls[DEAD] <= 5 + settings.WEBHOOK_ENDPOINT_CONCURRENCY - 1
    assert channels.calls[HEALTHY] == 10
    dead.refresh_from_db()
    assert dead.circuit_open_until == NOW + timedelta(minutes=1)
    assert dead.consecutive_failures == channels.calls[DEAD]
    assert dead.health(now=NOW) == "open"
    waiting = Notification.objects.filter(webhook_endpoint=dead)
    assert waiting.count() == 40
    deferred = waiting.filter(next_fire_at=dead.circuit_open_until, error_count=0)
    assert deferred.count() == 40 - summary.backed_off
    assert summary.backed_off == channels.calls[DEAD]
    assert Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).count() == deferred.count()
    assert set(
        Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).values_list(
            "error_category", flat=True
        )
    ) == {"circuit_open"}


def test_after_the_interval_one_row_probes_and_a_success_closes_the_circuit(db, channels):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=5, circuit_open_until=NOW, circuit_interval_seconds=60
    )
    make_notifications(8, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW + timedelta(seconds=1), senders=channels.senders)

    assert summary.delivered == 8
    endpoint.refresh_from_db()
    assert (endpoint.consecutive_failures, endpoint.circuit_open_until) == (0, None)
    assert endpoint.circuit_interval_seconds == 0


def test_an_open_circuit_defers_the_webhook_and_the_email_goes_now(db, channels):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    open_until = NOW + timedelta(minutes=4)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=5, circuit_open_until=open_until, circuit_interval_seconds=240
    )
    [row] = make_notifications(
        1,
        tenant=tenant,
        endpoint=endpoint,
        channels=("email", "webhook"),
        email_to=("ann@example.com",),
        next_fire_at=NOW,
    )

    first = run_tick(now=NOW, senders=channels.senders)

    assert (first.deferred, channels.emails, channels.calls[HEALTHY]) == (1, 1, 0)
    row.refresh_from_db()
    assert row.channel_state == {"email:ann@example.com": "delivered"}
    assert (row.next_fire_at, row.error_count, row.occurrence) == (open_until, 0, 1)

    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(circuit_open_until=NOW)
    second = run_tick(now=open_until, senders=channels.senders)

    # The webhook goes alone; the email is not sent twice; the one-shot is done.
    assert (second.delivered, channels.emails, channels.calls[HEALTHY]) == (1, 1, 1)
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=row.pk) == (
        "completed",
        None,
    )
    outcomes = Delivery.objects.filter(notification_id=row.pk).values_list("channel", "outcome")
    assert sorted(outcomes) == [
        ("email", "delivered"),
        ("webhook", "deferred"),
        ("webhook", "delivered"),
    ]


def test_a_recurring_row_deferred_after_its_email_advances_once_the_webhook_went(db, channels):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=5,
        circuit_open_until=NOW + timedelta(minutes=1),
        circuit_interval_seconds=60,
    )
    [row] = make_notifications(
        1,
        tenant=tenant,
        endpoint=endpoint,
        channels=("email", "webhook"),
        email_to=("ann@example.com",),
        next_fire_at=NOW,
        rrule="FREQ=DAILY",
    )
    run_tick(now=NOW, senders=channels.senders)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(circuit_open_until=NOW)

    run_tick(now=NOW + timedelta(minutes=1), senders=channels.senders)

    row.refresh_from_db()
    assert (row.occurrence, row.channel_state, row.next_fire_at) == (
        2,
        {},
        NOW + timedelta(days=1),
    )
    assert (channels.emails, channels.calls[HEALTHY]) == (1, 1)


def test_a_new_url_or_a_rotated_secret_closes_the_circuit(db, local_channels):
    from webhooks.endpoints import webhook_endpoint_rotate_secret, webhook_endpoint_update

    tenant = make_tenant()
    first = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/first")
    second = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/second")
    broken = {"consecutive_failures": 7, "circuit_open_until": NOW, "circuit_interval_seconds": 120}
    WebhookEndpoint.objects.update(**broken)

    webhook_endpoint_update(tenant=tenant, endpoint_id=first.pk, url="http://127.0.0.1:9/v2")
    webhook_endpoint_rotate_secret(tenant=tenant, endpoint_id=second.pk)

    for endpoint in (first, second):
        endpoint.refresh_from_db()
        assert endpoint.consecutive_failures == 0
        assert endpoint.circuit_open_until is None
        assert endpoint.circuit_interval_seconds == 0


def test_a_tick_stopped_by_its_cap_counts_the_due_rows_it_left(db, settings, channels):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 16
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(25, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    capped = run_tick(now=NOW, max_rows=10, senders=channels.senders)
    drained = run_tick(now=NOW, senders=channels.senders)

    assert (capped.delivered, capped.due_left) == (10, 15)
    assert (drained.delivered, drained.due_left) == (15, 0)
    assert "due_left=15" in capped.line()


def test_a_claim_takes_no_more_of_one_endpoints_rows_than_it_can_use(db):
    from delivery.scheduler.tick import notification_claim

    tenant = make_tenant()
    first = make_endpoint(tenant=tenant, url=HEALTHY)
    second = make_endpoint(tenant=tenant, url=DEAD)
    make_notifications(10, tenant=tenant, endpoint=first, next_fire_at=NOW)
    make_notifications(10, tenant=tenant, endpoint=second, next_fire_at=NOW)
    make_notifications(
        3, tenant=tenant, channels=("email",), email_to=("a@example.com",), next_fire_at=NOW
    )

    claimed = notification_claim(now=NOW, lease=timedelta(seconds=45), limit=16, per_endpoint=4)

    per_endpoint = Counter(row.webhook_endpoint_id for row in claimed)
    assert per_endpoint == {first.pk: 4, second.pk: 4, None: 3}


def test_a_single_endpoint_burst_needs_no_releases(db, channels):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(60, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, senders=channels.senders)

    assert (summary.delivered, summary.released) == (60, 0)
    assert summary.claimed == 60


def test_a_one_endpoint_burst_never_claims_an_empty_batch_while_rows_are_due(
    db, channels, monkeypatch
):
    from delivery.scheduler import tick as tick_module

    sizes = []
    real_claim = tick_module.notification_claim

    def counted_claim(**options):
        claimed = real_claim(**options)
        sizes.append(len(claimed))
        return claimed

    monkeypatch.setattr(tick_module, "notification_claim", counted_claim)
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=HEALTHY)
    make_notifications(60, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, senders=channels.senders)

    assert summary.delivered == 60
    # A claim comes when the endpoint can take rows again, not while its slots are busy.
    assert 0 not in sizes[:-1], sizes
    assert sum(sizes) == 60
