"""GET /v1/usage: the plan, the period and each limit with its use."""

import uuid

from tests.tenancy.plans_support import put_on_plan

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}


def test_usage_shows_the_plan_the_period_and_each_limit_with_its_use(alice, bob, public_dns):
    put_on_plan(alice.tenant, notifications_per_month=100, members=5, requests_per_minute=600)
    for _ in range(3):
        alice.client().post(
            "/v1/notifications",
            EMAIL,
            format="json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
    alice.client().post(
        "/v1/webhook-endpoints", {"url": "https://hooks.example.com/"}, format="json"
    )

    response = bob.client().get("/v1/usage")

    assert response.status_code == 200
    body = response.json()
    assert body["plan"] == "plan of Tenant A"
    assert body["period_start"].endswith("-01T00:00:00Z")
    assert body["period_end"].endswith("-01T00:00:00Z")
    assert body["usage"] == {
        "notifications_per_month": {"used": 3, "limit": 100},
        "messages_per_month": {"used": 0, "limit": None},
        "webhook_endpoints": {"used": 1, "limit": None},
        "members": {"used": 2, "limit": 5},
        "requests_per_minute": {"used": None, "limit": 600},
        "deliveries_per_second": {"used": None, "limit": None},
        "retention_days": {"used": None, "limit": None},
    }


def test_a_tenant_without_a_plan_is_unlimited(charlie):
    body = charlie.client().get("/v1/usage").json()

    assert body["plan"] is None
    assert {entry["limit"] for entry in body["usage"].values()} == {None}
    assert body["usage"]["members"]["used"] == 1


def test_usage_counts_only_the_callers_tenant(alice, charlie):
    alice.client().post("/v1/notifications", EMAIL, format="json", headers={"Idempotency-Key": "k"})

    body = charlie.client().get("/v1/usage").json()

    assert body["usage"]["notifications_per_month"]["used"] == 0
