"""`retention_days` feeds prune: a tenant on a plan keeps its rows as long as the plan says."""

import io
import json
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from delivery.models import Delivery
from tenancy.models import Plan
from tests.tenancy.plans_support import put_on_plan


def _log(tenant, *, days_ago: int, now) -> None:
    Delivery.objects.create(
        notification_id=tenant.pk,
        tenant=tenant,
        occurrence=1,
        channel="email",
        outcome="delivered",
        attempted_at=now - timedelta(days=days_ago),
    )


def _left(tenant) -> list[int]:
    now = timezone.now()
    rows = Delivery.objects.filter(tenant=tenant).order_by("attempted_at")
    return [round((now - row.attempted_at) / timedelta(days=1)) for row in rows]


def test_each_tenant_keeps_its_delivery_log_as_long_as_its_plan_says(alice, charlie, settings):
    settings.DELIVERY_RETENTION_DAYS = 30
    now = timezone.now()
    put_on_plan(alice.tenant, retention_days=7)
    for tenant in (alice.tenant, charlie.tenant):
        for days_ago in (40, 20, 5):
            _log(tenant, days_ago=days_ago, now=now)

    call_command("prune", "--json", stdout=(out := io.StringIO()))

    assert json.loads(out.getvalue())["deliveries"] == 3
    assert _left(alice.tenant) == [5]
    assert _left(charlie.tenant) == [20, 5]


def test_a_plan_may_keep_rows_longer_than_the_global_retention(alice, settings):
    settings.DELIVERY_RETENTION_DAYS = 30
    now = timezone.now()
    put_on_plan(alice.tenant, retention_days=90)
    for days_ago in (100, 40, 5):
        _log(alice.tenant, days_ago=days_ago, now=now)

    call_command("prune", "--dry-run", "--json", stdout=(preview := io.StringIO()))
    call_command("prune", "--json", stdout=io.StringIO())

    assert json.loads(preview.getvalue())["deliveries"] == 1
    assert _left(alice.tenant) == [40, 5]


def test_the_default_plans_retention_holds_for_tenants_without_a_plan(alice, settings):
    settings.DELIVERY_RETENTION_DAYS = 30
    Plan.objects.create(name="free", retention_days=3)
    settings.DEFAULT_PLAN = "free"
    now = timezone.now()
    for days_ago in (10, 1):
        _log(alice.tenant, days_ago=days_ago, now=now)

    call_command("prune", "--json", stdout=io.StringIO())

    assert _left(alice.tenant) == [1]
