"""CompiledQuery: one compilation, the ORM's own instances (or named rows), each run's
values bound; insert_together: all rows or none, one statement on PostgreSQL; insert_rows
and raw_instances: what bulk_create and raw() give, for the hot paths."""

import gc
import threading
import uuid
import weakref
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, models, transaction
from django.db.models import FilteredRelation, Q
from django.db.models.functions import Upper
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dbtools.compiled import (
    CompiledQuery,
    Param,
    insert_one,
    insert_rows,
    insert_together,
    raw_instances,
)
from delivery.models import Delivery, DeliveryOutcome, Notification
from projects.models import Project, ProjectStatus
from tenancy.models import ApiToken, Membership, Role, Tenant
from tests.conftest import make_member, requires_postgres
from tests.delivery.factories import make_notifications


def token_with_membership() -> models.QuerySet[ApiToken]:
    return (
        ApiToken.objects.select_related("user")
        .filter(prefix=Param("prefix", models.CharField()))
        .annotate(
            membership=FilteredRelation(
                "user__memberships",
                condition=Q(user__memberships__tenant_id=Param("tenant", models.UUIDField())),
            ),
            member_tenant=FilteredRelation("membership__tenant"),
        )
        # The Django plugin checks select_related against the model's fields only; these
        # two are the FilteredRelations annotated just above.
        .select_related("membership", "member_tenant")  # type: ignore[misc]
    )[:2]


QUERY = CompiledQuery(token_with_membership)


def prefix(actor) -> str:
    found = ApiToken.prefix_of(actor.token)
    assert found is not None, "the fixtures' tokens are ours"
    return found


def test_rows_are_the_orm_instances_with_their_related_objects(alice):
    [token] = QUERY.run(prefix=prefix(alice), tenant=alice.tenant.id)
    expected = ApiToken.objects.select_related("user").get(prefix=prefix(alice))

    fields = [field.attname for field in ApiToken._meta.concrete_fields]
    assert [getattr(token, name) for name in fields] == [getattr(expected, name) for name in fields]
    assert token.created_at.tzinfo is not None  # converted as the ORM converts
    assert token.user.email == "alice@example.com"
    assert token.user.date_joined == expected.user.date_joined
    assert token.membership == Membership.objects.get(user=alice.user)
    assert token.membership.role == Role.OWNER
    assert token.member_tenant == alice.tenant
    assert token.member_tenant.name == "Tenant A"
    assert not token._state.adding


def public_state(instance: models.Model) -> dict[str, Any]:
    """What an instance's `_state` says of it (Django 6.1 adds its fetch mode), without
    the caches that fill as it is used."""
    state = instance._state
    names = ("db", "adding", "fetch_mode")
    return {name: getattr(state, name) for name in names if hasattr(state, name)}


def test_rows_and_their_related_objects_have_the_orms_state(alice):
    [token] = QUERY.run(prefix=prefix(alice), tenant=alice.tenant.id)
    expected = ApiToken.objects.select_related("user").get(prefix=prefix(alice))

    assert public_state(token) == public_state(expected)
    assert public_state(token.user) == public_state(expected.user)
    assert public_state(token.membership) == public_state(Membership.objects.get(user=alice.user))


def test_each_run_binds_its_values_into_one_compiled_statement(
    alice, charlie, monkeypatch, django_assert_num_queries
):
    make_member(charlie.tenant, "alice@example.com", role=Role.MEMBER)
    query = CompiledQuery(token_with_membership)
    compilations = []
    original = SQLCompiler.as_sql

    def counted(self, *args, **kwargs):
        compilations.append(self.query.model)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", counted)

    with django_assert_num_queries(3):
        [in_a] = query.run(prefix=prefix(alice), tenant=alice.tenant.id)
        [in_b] = query.run(prefix=prefix(alice), tenant=charlie.tenant.id)
        [charlies] = query.run(prefix=prefix(charlie), tenant=charlie.tenant.id)

    assert compilations == [ApiToken]
    assert (in_a.member_tenant, in_a.membership.role) == (alice.tenant, Role.OWNER)
    assert (in_b.member_tenant, in_b.membership.role) == (charlie.tenant, Role.MEMBER)
    assert charlies.user == charlie.user


def test_no_match_is_an_empty_list_and_an_unjoined_relation_is_unset(alice, charlie):
    assert QUERY.run(prefix="tkw_000000000000", tenant=alice.tenant.id) == []

    [token] = QUERY.run(prefix=prefix(alice), tenant=charlie.tenant.id)

    assert not hasattr(token, "membership")


def named_rows(tenant: Any) -> models.QuerySet:
    """Annotations named before fields, a JSON and a nullable foreign key column."""
    return (
        Notification.objects.filter(tenant_id=tenant)
        .annotate(shout=Upper("subject"))
        .order_by("-created_at", "-id")
        .values_list("shout", "id", "channels", "project_id", "created_at", named=True)
    )


def test_named_rows_are_the_querysets_own(alice, charlie):
    due = {"next_fire_at": timezone.now()}
    make_notifications(3, tenant=alice.tenant, subject="hi", channels=["email", "webhook"], **due)
    make_notifications(1, tenant=charlie.tenant, **due)
    expected = list(named_rows(alice.tenant.id))

    query = CompiledQuery(lambda: named_rows(Param("tenant", models.UUIDField())))
    rows = query.run(tenant=alice.tenant.id)

    assert rows == expected and len(rows) == 3
    assert [row._fields for row in rows] == [row._fields for row in expected]
    assert rows[0].shout == "HI" and rows[0].channels == ["email", "webhook"]
    assert isinstance(rows[0].id, uuid.UUID) and rows[0].created_at.tzinfo is not None


def test_rows_of_any_other_shape_are_refused(alice):
    query = CompiledQuery(lambda: Project.objects.values("id"))

    with pytest.raises(TypeError, match="named=True"):
        query.run()


def test_insert_together_stores_every_row_with_its_defaults(db):
    tenant = Tenant(name="T")
    project = Project(tenant=tenant, name="P")
    membership = Membership(tenant=tenant, user=User.objects.create(username="u"), role="owner")

    insert_together([tenant, project, membership])

    stored = Project.objects.select_related("tenant").get(pk=project.pk)
    assert (stored.tenant.name, stored.status) == ("T", ProjectStatus.PROVISIONING)
    assert stored.created_at == project.created_at
    assert Membership.objects.get(tenant=tenant).role == "owner"
    assert not project._state.adding
    assert project._state.db == "default"


def test_insert_one_stores_what_save_stores_in_one_statement_without_a_savepoint(
    db, django_assert_num_queries
):
    tenant = Tenant.objects.create(name="T")
    ours, saved = Project(tenant=tenant, name="P"), Project(tenant=tenant, name="P")
    saved.save(force_insert=True)

    with transaction.atomic(), django_assert_num_queries(1) as captured:
        insert_one(ours)

    assert captured.captured_queries[0]["sql"].startswith("INSERT INTO")
    fields = [field.attname for field in Project._meta.concrete_fields if field.attname != "id"]
    stored, expected = Project.objects.get(pk=ours.pk), Project.objects.get(pk=saved.pk)
    for name in fields:
        if name not in {"created_at", "updated_at"}:
            assert getattr(stored, name) == getattr(expected, name), name
    assert public_state(ours) == public_state(saved)


def test_a_failing_row_stores_none_and_leaves_the_transaction_usable(db):
    """The db fixture runs the test inside a transaction, as a caller's would be."""
    first = Tenant(name="first")
    clash = Tenant(id=first.id, name="the same primary key")

    with pytest.raises(IntegrityError):
        insert_together([first, Project(tenant=first, name="P"), clash])

    assert not Tenant.objects.exists()
    assert not Project.objects.exists()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_rows_are_one_statement_without_a_transaction(
    django_assert_num_queries,
):
    tenant = Tenant(name="T")

    with django_assert_num_queries(1) as context:
        insert_together([tenant, Project(tenant=tenant, name="P")])

    assert context.captured_queries[0]["sql"].startswith("WITH ")
    assert Project.objects.get().tenant_id == tenant.id


def delivery_logs(tenant: Tenant, count: int) -> list[Delivery]:
    """Delivery-log rows as the tick makes them: some columns NULL in every row (skipped_*),
    some only in some (http_status, late_ms), an enum member, a long error text, and one
    that an array literal would have to quote and escape."""
    at = timezone.now()
    return [
        Delivery(
            notification_id=uuid.uuid4(),
            tenant_id=tenant.id,
            occurrence=index,
            endpoint_id=uuid.uuid4() if index % 2 else None,
            attempt=1,
            channel="webhook",
            outcome=DeliveryOutcome.FAILED if index % 3 else DeliveryOutcome.DELIVERED,
            http_status=500 if index % 3 else None,
            error=("x" * 500 if index % 3 == 1 else 'a "quoted", {braced} \\ NULL é')
            if index % 3
            else "",
            duration_ms=index,
            attempted_at=at,
            late_ms=index * 1000 if index % 2 else None,
        )
        for index in range(count)
    ]


def stored(model: type[models.Model], order_by: str) -> list[dict]:
    names = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
    return list(model._default_manager.order_by(order_by).values(*names))


def test_insert_rows_stores_what_bulk_create_stores(db):
    tenant = Tenant.objects.create(name="T")
    logs = delivery_logs(tenant, 7)

    insert_rows(Delivery, logs)
    ours = stored(Delivery, "occurrence")
    Delivery.objects.all().delete()
    Delivery.objects.bulk_create(delivery_logs_like(logs))

    assert ours == stored(Delivery, "occurrence")
    assert len(ours) == 7
    assert all(not log._state.adding and log._state.db == "default" for log in logs)


def delivery_logs_like(logs: list[Delivery]) -> list[Delivery]:
    names = [f.attname for f in Delivery._meta.concrete_fields if not f.primary_key]
    return [Delivery(**{name: getattr(log, name) for name in names}) for log in logs]


def test_insert_rows_applies_defaults_and_pre_save(db):
    tenant = Tenant.objects.create(name="T")
    minimal = Delivery(notification_id=uuid.uuid4(), tenant_id=tenant.id, occurrence=0)

    insert_rows(Delivery, [minimal])
    insert_rows(Notification, [])  # nothing to do: no statement, no error

    row = Delivery.objects.get()
    assert (row.channel, row.error, row.skipped_count, row.late_ms) == ("", "", 0, None)
    assert row.created_at == minimal.created_at


def test_insert_rows_is_one_statement_for_any_number_of_rows_on_postgresql(db):
    tenant = Tenant.objects.create(name="T")
    statements = []
    for count in (1, 3, 40):
        with CaptureQueriesContext(connection) as run:
            insert_rows(Delivery, delivery_logs(tenant, count))
        statements.append([query["sql"] for query in run.captured_queries])
    assert Delivery.objects.count() == 44
    if connection.vendor == "postgresql":
        # One array per column: one statement, whose text is the same for every size.
        assert [len(sqls) for sqls in statements] == [1, 1, 1]
        assert all("SELECT * FROM unnest(" in sqls[0] for sqls in statements)


def test_raw_instances_are_the_raw_querysets_instances(db):
    tenant = Tenant.objects.create(name="T")
    make_notifications(3, tenant=tenant, next_fire_at=timezone.now(), channels=["email"])
    table = Notification._meta.db_table
    sql = f"SELECT *, 41 + 1 AS answer FROM {table} ORDER BY id"  # noqa: S608

    got = raw_instances(Notification, sql, [])
    expected = list(Notification.objects.raw(sql, []))

    names = [field.attname for field in Notification._meta.concrete_fields]
    assert [[getattr(row, name) for name in names] for row in got] == [
        [getattr(row, name) for name in names] for row in expected
    ]
    assert [row.answer for row in got] == [42, 42, 42]
    assert got[0].channels == ["email"]  # JSON decoded as the field decodes it
    assert got[0].next_fire_at.tzinfo is not None
    assert not got[0]._state.adding


def test_what_was_compiled_for_a_connection_goes_with_it(transactional_db):
    """A thread's connection is freed with the thread, whatever was compiled for it: the
    tick's database thread opens one a tick, and a cache keyed by connection that held
    their converters kept every one of them."""
    opened: list[weakref.ref] = []

    def compile_on_a_connection_of_its_own() -> None:
        own = connections[DEFAULT_DB_ALIAS]
        assert own is not connection
        assert QUERY.run(prefix="tw_nobody", tenant=uuid.uuid4()) == []
        sql = f"SELECT id, name FROM {Tenant._meta.db_table} WHERE name = %s"  # noqa: S608
        assert raw_instances(Tenant, sql, ["nobody"]) == []
        with transaction.atomic():
            insert_rows(Tenant, [Tenant(name="rolled back")])
            transaction.set_rollback(True)
        own.close()
        opened.append(weakref.ref(own))

    thread = threading.Thread(target=compile_on_a_connection_of_its_own)
    thread.start()
    thread.join()
    gc.collect()

    assert len(opened) == 1, "the thread compiled, ran and closed its connection"
    assert opened[0]() is None
