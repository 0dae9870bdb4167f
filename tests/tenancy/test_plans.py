"""Plans: DEFAULT_PLAN for tenants without one, `manage.py set_plan`, the admin."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError

from tenancy.models import Plan, Tenant
from tenancy.plans import UNLIMITED, tenant_limits
from tests.conftest import make_owner


@pytest.mark.django_db
def test_a_new_tenant_gets_the_default_plan(settings):
    Plan.objects.create(name="free", notifications_per_month=100)
    settings.DEFAULT_PLAN = "free"

    owner = make_owner("New", "new@example.com")

    assert Tenant.objects.get(pk=owner.tenant.pk).plan.name == "free"
    assert tenant_limits(owner.tenant).notifications_per_month == 100


@pytest.mark.django_db
def test_a_tenant_without_a_plan_has_the_default_plans_limits(settings):
    tenant = Tenant.objects.create(name="Old")
    Plan.objects.create(name="free", members=3)
    settings.DEFAULT_PLAN = "free"

    limits = tenant_limits(tenant)

    assert (limits.plan, limits.members, limits.webhook_endpoints) == ("free", 3, None)


@pytest.mark.django_db
def test_without_a_default_plan_a_tenant_is_unlimited(settings):
    settings.DEFAULT_PLAN = ""
    owner = make_owner("Free", "free@example.com")

    assert Tenant.objects.get(pk=owner.tenant.pk).plan is None
    assert tenant_limits(owner.tenant) == UNLIMITED


@pytest.mark.django_db
def test_set_plan_by_id_and_by_name(alice):
    Plan.objects.create(name="pro", members=50)
    Plan.objects.create(name="team", members=10)
    out = StringIO()

    call_command("set_plan", str(alice.tenant.id), "pro", stdout=out)
    assert Tenant.objects.get(pk=alice.tenant.pk).plan.name == "pro"
    assert "pro" in out.getvalue()

    call_command("set_plan", "Tenant A", "team", stdout=StringIO())
    assert Tenant.objects.get(pk=alice.tenant.pk).plan.name == "team"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("tenant", "plan", "message"),
    [
        ("00000000-0000-0000-0000-000000000000", "pro", "No tenant"),
        ("Nobody", "pro", "No tenant"),
        ("Tenant A", "gold", "No plan is named 'gold'"),
    ],
)
def test_set_plan_refuses_an_unknown_tenant_or_plan(alice, tenant, plan, message):
    Plan.objects.create(name="pro")

    with pytest.raises(CommandError, match=message):
        call_command("set_plan", tenant, plan, stdout=StringIO())

    assert Tenant.objects.get(pk=alice.tenant.pk).plan is None


@pytest.mark.django_db
def test_set_plan_refuses_a_name_two_tenants_share(alice):
    Tenant.objects.create(name="Tenant A")
    Plan.objects.create(name="pro")

    with pytest.raises(CommandError, match="Several tenants"):
        call_command("set_plan", "Tenant A", "pro", stdout=StringIO())


def test_an_operator_edits_plans_in_the_admin_and_the_change_applies_at_once(admin_client, alice):
    added = admin_client.post(
        "/admin/tenancy/plan/add/", {"name": "starter", "members": "2", "retention_days": "7"}
    )
    assert added.status_code == 302
    plan = Plan.objects.get(name="starter")
    call_command("set_plan", str(alice.tenant.id), "starter", stdout=StringIO())
    assert tenant_limits(Tenant.objects.get(pk=alice.tenant.pk)).members == 2

    admin_client.post(f"/admin/tenancy/plan/{plan.pk}/change/", {"name": "starter", "members": "5"})

    limits = tenant_limits(Tenant.objects.get(pk=alice.tenant.pk))
    assert (limits.members, limits.retention_days) == (5, None)
    assert admin_client.get("/admin/tenancy/plan/").status_code == 200


def test_a_plans_name_is_unique(db):
    Plan.objects.create(name="pro")

    with pytest.raises(IntegrityError):
        Plan.objects.create(name="pro")
