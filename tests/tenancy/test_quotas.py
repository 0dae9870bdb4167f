"""Periodic quotas and count limits: 429 `quota-exceeded`, 403 `plan-limit`, nothing written."""

import itertools
import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.models import Notification, NotificationSource, WebhookEndpoint
from notifications.services import notification_create
from tenancy.models import Membership, OperationKey, UsageCounter
from tenancy.plans import UNLIMITED, Limits, forget_plans, tenant_limits
from tenancy.quotas import SHARDS, PlanLimitReached, QuotaExceeded, charge, period_of, usage
from tests.conftest import make_member
from tests.onboarding.conftest import emailed_token
from tests.support.problems import assert_problem
from tests.tenancy.plans_support import put_on_plan
from webhooks.event_types import event_type_create
from webhooks.models import Message

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}
NOW = datetime(2031, 5, 20, 12, 0, tzinfo=UTC)


def _create(actor, key=None):
    return actor.client().post(
        "/v1/notifications",
        EMAIL,
        format="json",
        headers={"Idempotency-Key": key or str(uuid.uuid4())},
    )


def test_the_period_is_the_calendar_month_in_utc():
    period = period_of(datetime(2031, 12, 31, 23, 59, tzinfo=UTC))

    assert (period.start, period.end) == (
        datetime(2031, 12, 1, tzinfo=UTC),
        datetime(2032, 1, 1, tzinfo=UTC),
    )


@pytest.mark.django_db
def test_charges_fill_the_quota_exactly_and_then_refuse(alice):
    put_on_plan(alice.tenant, messages_per_month=13)

    for _ in range(13):
        charge(alice.tenant.id, "messages_per_month", now=NOW)
    with pytest.raises(QuotaExceeded) as refused:
        charge(alice.tenant.id, "messages_per_month", now=NOW)

    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 13
    assert refused.value.members == {"limit": 13, "used": 13, "resets_at": "2031-06-01T00:00:00Z"}
    assert refused.value.retry_after == 11 * 86400 + 12 * 3600


@pytest.mark.django_db
def test_a_charge_of_several_that_no_single_slot_holds_is_taken_whole_or_not_at_all(alice):
    put_on_plan(alice.tenant, messages_per_month=SHARDS)  # one use per slot

    charge(alice.tenant.id, "messages_per_month", n=SHARDS - 2, now=NOW)
    with pytest.raises(QuotaExceeded):
        charge(alice.tenant.id, "messages_per_month", n=3, now=NOW)
    charge(alice.tenant.id, "messages_per_month", n=2, now=NOW)

    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == SHARDS


@pytest.mark.django_db
def test_a_new_month_starts_from_zero(alice):
    put_on_plan(alice.tenant, messages_per_month=1)
    charge(alice.tenant.id, "messages_per_month", now=NOW)

    charge(alice.tenant.id, "messages_per_month", now=datetime(2031, 6, 1, tzinfo=UTC))

    assert UsageCounter.objects.filter(tenant=alice.tenant).count() == 2 * SHARDS


@pytest.mark.django_db
def test_unlimited_use_is_counted_too(alice):
    for _ in range(3):
        charge(alice.tenant.id, "messages_per_month", now=NOW)

    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 3


def test_the_notifications_quota_answers_429_with_its_figures_and_writes_nothing(alice):
    put_on_plan(alice.tenant, notifications_per_month=2)
    assert [_create(alice).status_code for _ in range(2)] == [201, 201]
    keys = OperationKey.objects.count()

    refused = _create(alice, key="over")

    body = assert_problem(refused, 429)
    assert body["type"].endswith("/quota-exceeded")
    assert (body["limit"], body["used"]) == (2, 2)
    resets_at = datetime.fromisoformat(body["resets_at"])
    assert resets_at.day == 1 and resets_at.tzinfo is not None
    assert 0 < int(refused["Retry-After"]) <= 31 * 86400
    assert Notification.objects.filter(tenant=alice.tenant).count() == 2
    assert OperationKey.objects.count() == keys


def test_a_refused_create_retried_with_its_key_after_an_upgrade_creates_once(alice):
    plan = put_on_plan(alice.tenant, notifications_per_month=0)
    assert _create(alice, key="k").status_code == 429
    assert _create(alice, key="k").status_code == 429  # nothing stored: refused again

    plan.notifications_per_month = 1
    plan.save()
    created = _create(alice, key="k")
    replayed = _create(alice, key="k")

    assert (created.status_code, replayed.status_code) == (201, 201)
    assert replayed["Idempotent-Replayed"] == "true"
    assert replayed.content == created.content
    assert Notification.objects.filter(tenant=alice.tenant).count() == 1


def test_a_replay_of_a_create_made_before_the_quota_ran_out_still_answers_201(alice):
    put_on_plan(alice.tenant, notifications_per_month=1)
    first = _create(alice, key="k")

    replayed = _create(alice, key="k")

    assert (first.status_code, replayed.status_code) == (201, 201)
    assert replayed.content == first.content


def test_the_products_own_emails_do_not_count(alice):
    put_on_plan(alice.tenant, notifications_per_month=0)

    notification_create(
        tenant=alice.tenant,
        channels=["email"],
        email_to=["x@example.com"],
        subject="Welcome",
        source=NotificationSource.SYSTEM,
    )

    assert Notification.objects.filter(tenant=alice.tenant).count() == 1


def test_one_tenants_quota_leaves_another_alone(alice, charlie):
    put_on_plan(alice.tenant, notifications_per_month=0)

    assert _create(alice).status_code == 429
    assert _create(charlie).status_code == 201


def test_the_endpoint_limit_answers_403_plan_limit(alice, public_dns):
    put_on_plan(alice.tenant, webhook_endpoints=1)
    url = "https://hooks.example.com/a"
    assert (
        alice.client().post("/v1/webhook-endpoints", {"url": url}, format="json").status_code == 201
    )

    refused = alice.client().post("/v1/webhook-endpoints", {"url": url}, format="json")

    body = assert_problem(refused, 403)
    assert body["type"].endswith("/plan-limit")
    assert (body["limit"], body["used"]) == (1, 1)
    assert "Retry-After" not in refused
    assert WebhookEndpoint.objects.filter(tenant=alice.tenant).count() == 1


def test_the_members_limit_holds_at_invitation_accept(alice, anonymous):
    put_on_plan(alice.tenant, members=1)
    invited = alice.client().post(
        "/v1/invitations",
        {"email": "dan@example.com", "role": "member"},
        format="json",
        headers={"Idempotency-Key": "i"},
    )
    assert invited.status_code == 201

    refused = anonymous.post(
        "/v1/invitations/accept", {"token": emailed_token("dan@example.com")}, format="json"
    )

    body = assert_problem(refused, 403)
    assert body["type"].endswith("/plan-limit")
    assert (body["limit"], body["used"]) == (1, 1)
    assert Membership.objects.filter(tenant=alice.tenant).count() == 1
    assert invited.json()["status"] == "pending"
    assert alice.client().get("/v1/invitations").json()["results"][0]["status"] == "pending"


def test_the_members_limit_holds_when_an_operator_adds_a_member(alice):
    put_on_plan(alice.tenant, members=2)
    make_member(alice.tenant, "bea@example.com")

    with pytest.raises(PlanLimitReached, match="plan allows 2 members"):
        make_member(alice.tenant, "cid@example.com")

    assert Membership.objects.filter(tenant=alice.tenant).count() == 2
    make_member(alice.tenant, "bea@example.com", role="owner")  # a re-role adds no one


def _data_statements(queries) -> list[str]:
    verbs = [query["sql"].split()[0].upper() for query in queries.captured_queries]
    control = ("SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT")
    return [verb for verb in verbs if verb not in control]


@pytest.mark.django_db
def test_a_charge_far_from_the_limit_is_one_update_and_a_refusal_a_bounded_few(alice, monkeypatch):
    # Each charge picks the next slot (at random they may meet, which costs one more UPDATE).
    slots = itertools.count()
    monkeypatch.setattr("tenancy.quotas.random.randrange", lambda size: next(slots) % size)
    put_on_plan(alice.tenant, messages_per_month=SHARDS)
    limits = tenant_limits(alice.tenant)
    charge(alice.tenant.id, "messages_per_month", now=NOW, limits=limits)  # opens the month

    with CaptureQueriesContext(connection) as counted:
        charge(alice.tenant.id, "messages_per_month", now=NOW, limits=limits)
    for _ in range(SHARDS - 2):
        charge(alice.tenant.id, "messages_per_month", now=NOW, limits=limits)
    with CaptureQueriesContext(connection) as refused, pytest.raises(QuotaExceeded):
        charge(alice.tenant.id, "messages_per_month", now=NOW, limits=limits)

    assert _data_statements(counted) == ["UPDATE"]
    assert _data_statements(refused) == ["UPDATE"] * SHARDS + ["SELECT"]


def _publish(actor, body):
    return actor.client().post(
        "/v1/messages", body, format="json", headers={"Idempotency-Key": str(uuid.uuid4())}
    )


def test_the_messages_quota_answers_429_and_a_repeated_event_id_is_not_a_new_use(alice, public_dns):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    alice.client().post(
        "/v1/webhook-endpoints",
        {"url": "https://hooks.example.com/in"},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    put_on_plan(alice.tenant, messages_per_month=2)
    first = {"event_type": "invoice.paid", "payload": {"n": 1}, "event_id": "evt-1"}
    assert _publish(alice, first).status_code == 202
    assert _publish(alice, first).status_code == 202  # the same message, not a second use
    assert _publish(alice, {"event_type": "invoice.paid", "payload": {"n": 2}}).status_code == 202
    deliveries = Notification.objects.filter(tenant=alice.tenant).count()

    refused = _publish(alice, {"event_type": "invoice.paid", "payload": {"n": 3}})

    body = assert_problem(refused, 429)
    assert body["type"].endswith("/quota-exceeded")
    assert (body["limit"], body["used"]) == (2, 2)
    assert Message.objects.filter(tenant=alice.tenant).count() == 2
    assert Notification.objects.filter(tenant=alice.tenant).count() == deliveries


def test_a_resend_counts_one_message_and_is_refused_over_the_quota(alice, public_dns):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    endpoint = (
        alice.client()
        .post(
            "/v1/webhook-endpoints",
            {"url": "https://hooks.example.com/in"},
            format="json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        .json()["id"]
    )
    put_on_plan(alice.tenant, messages_per_month=2)
    message = _publish(alice, {"event_type": "invoice.paid", "payload": {"n": 1}}).json()["id"]
    path = f"/v1/messages/{message}/endpoints/{endpoint}/resend"

    def resend():
        return alice.client().post(path, headers={"Idempotency-Key": str(uuid.uuid4())})

    # The delivery is still pending: brought forward, its attempts reset, and charged.
    assert resend().status_code == 202
    assert usage(alice.tenant.id, "messages_per_month", period_of(timezone.now())) == 2
    deliveries = list(Notification.objects.filter(tenant=alice.tenant).values())

    refused = resend()

    body = assert_problem(refused, 429)
    assert body["type"].endswith("/quota-exceeded")
    assert (body["limit"], body["used"]) == (2, 2)
    assert list(Notification.objects.filter(tenant=alice.tenant).values()) == deliveries


def _fill_the_first_slots(monkeypatch, tenant_id, uses):
    """`uses` charges that all start at slot 0, so the first slots fill to their caps and
    the others stay empty: the uneven spread a downgrade meets."""
    monkeypatch.setattr("tenancy.quotas.random.randrange", lambda _: 0)
    for _ in range(uses):
        charge(tenant_id, "messages_per_month", now=NOW)
    monkeypatch.undo()


def _charges_taken(tenant_id, attempts):
    taken = 0
    for _ in range(attempts):
        try:
            charge(tenant_id, "messages_per_month", now=NOW)
        except QuotaExceeded:
            continue
        taken += 1
    return taken


@pytest.mark.django_db
def test_a_downgrade_mid_month_never_lets_the_use_pass_the_new_limit(alice, monkeypatch):
    plan = put_on_plan(alice.tenant, messages_per_month=80)
    _fill_the_first_slots(monkeypatch, alice.tenant.id, 20)  # slots 0 and 1 hold 10 each
    plan.messages_per_month = 24
    plan.save()
    forget_plans()

    assert _charges_taken(alice.tenant.id, 30) == 4
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 24


@pytest.mark.django_db
def test_a_downgrade_below_the_use_refuses_every_charge_and_says_so(alice, monkeypatch):
    plan = put_on_plan(alice.tenant, messages_per_month=80)
    _fill_the_first_slots(monkeypatch, alice.tenant.id, 30)
    plan.messages_per_month = 24
    plan.save()
    forget_plans()

    with pytest.raises(QuotaExceeded) as refused:
        charge(alice.tenant.id, "messages_per_month", now=NOW)

    assert _charges_taken(alice.tenant.id, 10) == 0
    assert refused.value.members["used"] == 30
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 30


@pytest.mark.django_db
def test_callers_that_read_the_old_and_the_new_limit_in_turn_take_exactly_the_new_room(
    alice, monkeypatch
):
    """Another process's plan cache still says 80 after the downgrade to 24: its charges
    never share the slots out for 80 again, so the caps the 24 set hold."""
    plan = put_on_plan(alice.tenant, messages_per_month=80)
    _fill_the_first_slots(monkeypatch, alice.tenant.id, 20)
    plan.messages_per_month = 24
    plan.save()
    stale, fresh = Limits(messages_per_month=80), Limits(messages_per_month=24)
    taken = 0
    for caller in [fresh, stale] * 10:
        try:
            charge(alice.tenant.id, "messages_per_month", now=NOW, limits=caller)
        except QuotaExceeded as refused:
            assert refused.members["limit"] == 24
            continue
        taken += 1

    assert taken == 4
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 24
    assert set(
        UsageCounter.objects.filter(tenant=alice.tenant).values_list("planned_limit", flat=True)
    ) == {24}


@pytest.mark.django_db
def test_a_caller_that_still_reads_unlimited_is_held_to_the_limit_set_since(alice):
    forget_plans()
    assert _charges_taken(alice.tenant.id, 10) == 10  # no plan: unlimited, counted
    put_on_plan(alice.tenant, messages_per_month=12)
    charge(alice.tenant.id, "messages_per_month", now=NOW)  # a caller that read the 12
    taken = 1
    for _ in range(5):  # one whose cache has not seen it yet
        try:
            charge(alice.tenant.id, "messages_per_month", now=NOW, limits=UNLIMITED)
        except QuotaExceeded:
            continue
        taken += 1

    assert taken == 2
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 12


@pytest.mark.django_db
def test_an_upgrade_mid_month_opens_exactly_the_new_room(alice):
    plan = put_on_plan(alice.tenant, messages_per_month=24)
    assert _charges_taken(alice.tenant.id, 30) == 24
    plan.messages_per_month = 80
    plan.save()
    forget_plans()

    assert _charges_taken(alice.tenant.id, 70) == 56
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 80


@pytest.mark.django_db
def test_a_limit_set_mid_month_counts_what_was_used_while_unlimited(alice):
    assert _charges_taken(alice.tenant.id, 10) == 10  # no plan: unlimited, but counted
    put_on_plan(alice.tenant, messages_per_month=12)

    assert _charges_taken(alice.tenant.id, 5) == 2
    assert usage(alice.tenant.id, "messages_per_month", period_of(NOW)) == 12
