"""The Idempotency-Key lookup reads one index entry however many keys a tenant holds, also
under the generic plan PostgreSQL caches for a prepared statement (a connection keeps it):
with an index on the tenant alone and an ORDER BY, a plan made before the table had
statistics read every key of the tenant on every create (digest joins fell from ~200/s to
~90/s as a tenant's keys grew)."""

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tenancy.api.idempotency import Idempotency
from tenancy.models import OperationKey
from tests.conftest import requires_postgres
from tests.delivery.factories import make_tenant
from tests.support.plans import plan_nodes

KEYS = 2_000


def add_keys(tenant, numbers: range) -> None:
    expires_at = timezone.now() + timedelta(days=1)
    OperationKey.objects.bulk_create(
        OperationKey(
            tenant=tenant,
            key=f"key-{n}",
            fingerprint="f" * 64,
            resource="/v1/notifications",
            response_status=201,
            expires_at=expires_at,
        )
        for n in numbers
    )


def tenant_with_many_keys():
    tenant = make_tenant()
    add_keys(tenant, range(KEYS))
    return tenant


def lookup(tenant) -> Idempotency:
    return Idempotency(tenant=tenant, key="key-1999", fingerprint="f" * 64, now=timezone.now())


@pytest.mark.django_db
def test_the_lookup_finds_the_key_without_ordering_the_tenants_keys():
    tenant = tenant_with_many_keys()

    with CaptureQueriesContext(connection) as captured:
        row = lookup(tenant).stored()

    assert row is not None and row.key == "key-1999"
    [statement] = [q["sql"] for q in captured.captured_queries]
    assert "ORDER BY" not in statement.upper()


@requires_postgres
@pytest.mark.django_db
def test_the_generic_plan_of_the_lookup_reads_one_index_entry_without_statistics():
    tenant = tenant_with_many_keys()  # and the table never analyzed
    statements = []

    def kept(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(kept):
        lookup(tenant).stored()
    [(sql, params)] = statements
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql)
    types = ["uuid" if isinstance(param, uuid.UUID) else "text" for param in params]

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE key_lookup({', '.join(types)}) AS {prepared}")
        # Literals: EXECUTE's arguments cannot be bound parameters. The values are the
        # test's own (no quotes in them).
        values = ", ".join(
            f"'{param}'::{type_}" for param, type_ in zip(params, types, strict=True)
        )
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE key_lookup({values})")
        (document,) = cursor.fetchone()
        cursor.execute("DEALLOCATE key_lookup")

    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    read = max(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in plan_nodes(plan)
    )
    assert read == 1
    assert "operation_key_tenant_key_unique" in json.dumps(plan)
