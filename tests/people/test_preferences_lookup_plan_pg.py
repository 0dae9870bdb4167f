"""The tick reads a claim's recipients one unique-index lookup per (tenant, key) pair: as a
plain join, the planner could make it a hash join over every recipient of every tenant,
on every claim."""

import json

import pytest
from django.db import connection

from people.models import Recipient
from people.preferences import _PEOPLE
from tests.conftest import requires_postgres
from tests.delivery.factories import make_tenant

pytestmark = [requires_postgres, pytest.mark.django_db]


def plan_of(pairs: list[list[str]]) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + _PEOPLE["postgresql"], [json.dumps(pairs)])
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_claims_recipients_are_looked_up_by_their_unique_key():
    tenant = make_tenant()
    Recipient.objects.bulk_create(
        Recipient(tenant=tenant, key=f"person-{n}", email=f"p{n}@example.com") for n in range(2_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE notifications_recipient")

    plan = plan_of([[str(tenant.pk), f"person-{n}"] for n in range(16)])

    assert "recipient_unique_tenant_key" in plan
    assert "Seq Scan on notifications_recipient" not in plan
