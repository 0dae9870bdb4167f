"""`requests_per_minute` replaces the per-user throttle on a tenant's routes."""

import pytest

from dbtools.models import RateWindow
from tests.support.problems import assert_problem
from tests.tenancy.plans_support import put_on_plan

pytestmark = pytest.mark.django_db


def test_the_plans_rate_is_shared_by_the_tenants_members(alice, bob, charlie, settings):
    settings.THROTTLE_RATE_USER = "1000/hour"
    put_on_plan(alice.tenant, requests_per_minute=3)

    allowed = [actor.client().get("/v1/notifications").status_code for actor in (alice, bob, alice)]
    refused = bob.client().get("/v1/usage")

    assert allowed == [200, 200, 200]
    assert_problem(refused, 429)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert RateWindow.objects.get(key=f"tenant:{alice.tenant.pk}").count == 4
    # Another tenant without the plan keeps the per-user limit.
    assert charlie.client().get("/v1/notifications").status_code == 200


def test_without_the_plans_rate_the_per_user_limit_holds(alice, bob, settings):
    settings.THROTTLE_RATE_USER = "2/hour"
    put_on_plan(alice.tenant, notifications_per_month=10)

    answers = [alice.client().get("/v1/usage").status_code for _ in range(3)]

    assert answers == [200, 200, 429]
    assert bob.client().get("/v1/usage").status_code == 200


def test_a_route_outside_any_tenant_keeps_the_per_user_limit(alice, settings):
    settings.THROTTLE_RATE_USER = "1000/hour"
    put_on_plan(alice.tenant, requests_per_minute=1)

    answers = [alice.client().get("/v1/me").status_code for _ in range(3)]

    assert answers == [200, 200, 200]
