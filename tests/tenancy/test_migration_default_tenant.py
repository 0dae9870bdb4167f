"""Tokens made before tokens had a default tenant: those of a user with one tenant act there
once the user joins another; those of a user with several still need X-Tenant-ID."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from tenancy import token_format
from tenancy.models import ApiToken, Membership, Role, Tenant, _digest


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _old_token(apps, user, name):
    plaintext = token_format.mint()
    apps.get_model("tenancy", "ApiToken").objects.create(
        user_id=user.pk,
        name=name,
        prefix=plaintext[: token_format.LOOKUP_LENGTH],
        digest=_digest(plaintext),
    )
    return plaintext


@pytest.mark.django_db(transaction=True)
def test_an_old_token_of_a_user_with_one_tenant_defaults_to_it():
    apps = _migrate([("tenancy", "0009_operation_key_tenant_index_dropped")])
    old_tenant, old_membership = (apps.get_model("tenancy", m) for m in ("Tenant", "Membership"))
    users = apps.get_model("auth", "User").objects
    one, two = users.create(username="one@example.com"), users.create(username="two@example.com")
    home, away = old_tenant.objects.create(name="Home"), old_tenant.objects.create(name="Away")
    old_membership.objects.create(user_id=one.pk, tenant_id=home.pk, role=Role.OWNER)
    for tenant in (home, away):
        old_membership.objects.create(user_id=two.pk, tenant_id=tenant.pk, role=Role.MEMBER)
    one_token, two_token = _old_token(apps, one, "one"), _old_token(apps, two, "two")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert ApiToken.objects.get(name="one").default_tenant_id == home.pk
    assert ApiToken.objects.get(name="two").default_tenant_id is None
    Membership.objects.create(
        user_id=one.pk, tenant=Tenant.objects.get(pk=away.pk), role=Role.MEMBER
    )
    for plaintext, status in ((one_token, 200), (two_token, 400)):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        assert client.get("/v1/projects").status_code == status
