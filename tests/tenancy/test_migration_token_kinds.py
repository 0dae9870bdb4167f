"""Tokens made before sessions and bound tokens existed keep working after the migration:
unbound API tokens, with their expiry as it was."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from tenancy import token_format
from tenancy.models import ApiToken, TokenKind, _digest


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_a_token_made_before_the_migration_is_an_unbound_api_token_that_works():
    apps = _migrate([("tenancy", "0004_invitations_signup")])
    user = apps.get_model("auth", "User").objects.create(username="old@example.com")
    plaintext = token_format.mint()
    apps.get_model("tenancy", "ApiToken").objects.create(
        user_id=user.pk,
        name="old",
        prefix=plaintext[: token_format.LOOKUP_LENGTH],
        digest=_digest(plaintext),
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    token = ApiToken.objects.get(name="old")
    assert (token.kind, token.tenant_id, token.expires_at) == (TokenKind.API, None, None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    response = client.get("/v1/me")
    assert response.status_code == 200
    assert response.json()["id"] == get_user_model().objects.get(pk=user.pk).pk
