"""`deliveries_per_second`: the tick paces a tenant's deliveries through the shared pacing
budget; a delivery over the rate is deferred, unattempted, never failed."""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.tenancy.plans_support import put_on_plan

pytestmark = pytest.mark.django_db

NOW = datetime(2031, 3, 3, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"


def _sender():
    sent: list[datetime] = []

    def send(message, *, timeout):
        sent.append(message)
        return DeliveryResult(ok=True, http_status=200)

    return send, sent


def test_a_plans_rate_defers_what_is_over_it_and_delivers_everything_in_time():
    paced, free = make_tenant("paced"), make_tenant("free")
    put_on_plan(paced, deliveries_per_second=2)
    for tenant in (paced, free):
        endpoint = make_endpoint(tenant=tenant, url=URL)
        make_notifications(6, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=NOW)
    send, _ = _sender()

    first = run_tick(now=NOW, senders=Senders(email=send, webhook=send))
    # Ticks every 100 ms of an injected clock, for three seconds.
    for step in range(1, 31):
        run_tick(
            now=NOW + timedelta(milliseconds=100 * step), senders=Senders(email=send, webhook=send)
        )

    delivered = Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED)
    assert delivered.filter(tenant=free).count() == 6
    assert first.deferred == 5  # the paced tenant's first slot went, the rest wait
    paced_times = sorted(delivered.filter(tenant=paced).values_list("attempted_at", flat=True))
    assert len(paced_times) == 6
    per_second = Counter(int((at - NOW).total_seconds()) for at in paced_times)
    assert max(per_second.values()) <= 2
    deferred = Delivery.objects.filter(tenant=paced, outcome=DeliveryOutcome.DEFERRED)
    assert set(deferred.values_list("error_category", flat=True)) == {"plan_rate"}
    assert not Delivery.objects.filter(outcome=DeliveryOutcome.FAILED).exists()
    assert not Notification.objects.exclude(state="completed").exists()
