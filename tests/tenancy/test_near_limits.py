"""Tenants near their limits: the Queue health page and the /metrics gauges."""

import re

import pytest
from django.utils import timezone

from operations.queue_health import queue_health
from tenancy.quotas import charge
from tests.conftest import make_member
from tests.tenancy.plans_support import put_on_plan


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_ENABLED = True
    settings.METRICS_TOKEN = ""


def _fill(alice, charlie) -> None:
    put_on_plan(alice.tenant, notifications_per_month=10, members=3)
    put_on_plan(charlie.tenant, notifications_per_month=100)
    for _ in range(9):
        charge(alice.tenant.id, "notifications_per_month")
    for _ in range(50):
        charge(charlie.tenant.id, "notifications_per_month")
    make_member(alice.tenant, "bea@example.com")  # 2 of 3 members: 67%, not near


def test_queue_health_lists_the_tenants_at_80_percent_or_more(alice, charlie):
    _fill(alice, charlie)

    near = queue_health(now=timezone.now()).near_limits

    assert [(use.tenant_name, use.name, use.used, use.limit) for use in near] == [
        ("Tenant A", "notifications_per_month", 9, 10)
    ]


def test_the_admin_page_shows_them(admin_client, alice, charlie):
    _fill(alice, charlie)

    html = admin_client.get("/admin/queue-health/").content.decode()

    section = html[html.index('id="near-limits"') :]
    assert "Tenant A" in section and "notifications_per_month" in section
    assert "Tenant B" not in section


def test_metrics_expose_a_gauge_per_limit_without_tenant_labels(client, alice, charlie, metrics_on):
    _fill(alice, charlie)

    text = client.get("/metrics").content.decode()

    assert 'tickwork_plan_usage_ratio{limit="notifications_per_month"} 0.9' in text
    assert 'tickwork_plan_tenants_near_limit{limit="notifications_per_month"} 1.0' in text
    assert 'tickwork_plan_usage_ratio{limit="members"} 0.6666' in text
    assert 'tickwork_plan_tenants_near_limit{limit="webhook_endpoints"} 0.0' in text
    plan_lines = [line for line in text.splitlines() if line.startswith("tickwork_plan_")]
    assert len(plan_lines) == 8
    for tenant in (alice.tenant, charlie.tenant):
        assert str(tenant.id) not in text
    assert not any(re.search("tenant=", line) for line in plan_lines)
