"""The quota at its boundary on real PostgreSQL connections: exact, and no hot row."""

import uuid
from functools import partial

import pytest
from django.db import transaction
from django.utils import timezone

from delivery.models import Notification, WebhookEndpoint
from tenancy.plans import forget_plans
from tenancy.quotas import QuotaExceeded, charge, period_of, usage
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together
from tests.tenancy.plans_support import put_on_plan

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}
RACERS = 20


def test_twenty_parallel_creates_with_five_left_make_exactly_five(alice):
    put_on_plan(alice.tenant, notifications_per_month=10)
    for _ in range(5):
        charge(alice.tenant.id, "notifications_per_month")

    def create() -> int:
        return (
            alice.client()
            .post(
                "/v1/notifications",
                EMAIL,
                format="json",
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            .status_code
        )

    statuses = run_together([create] * RACERS)

    assert sorted(statuses) == [201] * 5 + [429] * 15
    assert Notification.objects.filter(tenant=alice.tenant).count() == 5
    assert usage(alice.tenant.id, "notifications_per_month", period_of(timezone.now())) == 10


def test_a_charge_does_not_wait_for_another_open_charge_of_the_tenant(alice, monkeypatch):
    """Far from the limit, two creates in flight write different slots: the second one
    finishes while the first one's transaction is still open."""
    put_on_plan(alice.tenant, notifications_per_month=1000)
    charge(alice.tenant.id, "notifications_per_month")  # the period's slots exist
    slots = iter([0, 1])
    monkeypatch.setattr("tenancy.quotas.random.randrange", lambda _: next(slots))

    def second() -> None:
        charge(alice.tenant.id, "notifications_per_month")

    with transaction.atomic():
        charge(alice.tenant.id, "notifications_per_month")
        # The second charge ends while the first one's transaction is open: had it waited
        # on the first, this would time out.
        run_together([second])

    assert usage(alice.tenant.id, "notifications_per_month", period_of(timezone.now())) == 3


def test_parallel_endpoint_creates_with_one_left_make_exactly_one(alice, public_dns):
    put_on_plan(alice.tenant, webhook_endpoints=3)
    for n in range(2):
        alice.client().post(
            "/v1/webhook-endpoints", {"url": f"https://h.example.com/{n}"}, format="json"
        )
    racers = 6

    def create(n: int) -> int:
        return (
            alice.client()
            .post("/v1/webhook-endpoints", {"url": f"https://h.example.com/r{n}"}, format="json")
            .status_code
        )

    statuses = run_together([partial(create, n) for n in range(racers)])

    assert sorted(statuses) == [201] + [403] * (racers - 1)
    assert WebhookEndpoint.objects.filter(tenant=alice.tenant).count() == 3


def test_parallel_charges_after_a_downgrade_take_exactly_what_is_left(alice, monkeypatch):
    """Slots 0 and 1 hold 10 each under a limit of 80; at 24, eight slots of 3 would let
    38 through. Racing charges share out the rest once and take exactly 4."""
    plan = put_on_plan(alice.tenant, messages_per_month=80)
    monkeypatch.setattr("tenancy.quotas.random.randrange", lambda _: 0)
    for _ in range(20):
        charge(alice.tenant.id, "messages_per_month")
    monkeypatch.undo()
    plan.messages_per_month = 24
    plan.save()
    forget_plans()

    def one_charge() -> bool:
        try:
            charge(alice.tenant.id, "messages_per_month")
        except QuotaExceeded:
            return False
        return True

    taken = run_together([one_charge] * RACERS)

    assert sorted(taken) == [False] * (RACERS - 4) + [True] * 4
    assert usage(alice.tenant.id, "messages_per_month", period_of(timezone.now())) == 24
