"""CompiledQuery: one compilation, the ORM's own instances, each run's values bound."""

from django.db import models
from django.db.models import FilteredRelation, Q
from django.db.models.sql.compiler import SQLCompiler

from dbqueue.compiled import CompiledQuery, Param
from tenancy.models import ApiToken, Membership, Role
from tests.conftest import make_member


def token_with_membership() -> models.QuerySet[ApiToken]:
    return (
        ApiToken.objects.select_related("user")
        .filter(prefix=Param("prefix", models.CharField()))
        .annotate(
            membership=FilteredRelation(
                "user__memberships",
                condition=Q(user__memberships__tenant_id=Param("tenant", models.UUIDField())),
            ),
            tenant=FilteredRelation("membership__tenant"),
        )
        .select_related("membership", "tenant")
    )[:2]


QUERY = CompiledQuery(token_with_membership)


def prefix(actor) -> str:
    return ApiToken.prefix_of(actor.token)


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
    assert token.tenant == alice.tenant
    assert token.tenant.name == "Tenant A"
    assert not token._state.adding


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
    assert (in_a.tenant, in_a.membership.role) == (alice.tenant, Role.OWNER)
    assert (in_b.tenant, in_b.membership.role) == (charlie.tenant, Role.MEMBER)
    assert charlies.user == charlie.user


def test_no_match_is_an_empty_list_and_an_unjoined_relation_is_unset(alice, charlie):
    assert QUERY.run(prefix="tkw_000000000000", tenant=alice.tenant.id) == []

    [token] = QUERY.run(prefix=prefix(alice), tenant=charlie.tenant.id)

    assert not hasattr(token, "membership")
