"""The caller's own API tokens through the API: list, create (the secret once, replays are
409), revoke (the next request is 401); the checksummed format and its refusal without a
database read; tokens of the old format still working; last_used_at at most once a minute."""

import hashlib
import logging
import re
import uuid
import zlib
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tenancy import token_format
from tenancy.models import ApiToken, OperationKey
from tenancy.services import TokenRejected, _note_use, token_authenticate
from tests.web.write_endpoints import assert_problem

pytestmark = pytest.mark.django_db

NEW_SHAPE = re.compile(r"tkw_[0-9A-Za-z]{40}_[0-9A-Za-z]{6}")
TOKEN_FIELDS = {"id", "name", "prefix", "created_at", "last_used_at", "expires_at", "tenant_id"}


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def create(client: APIClient, body: dict, key: str | None = None):
    headers = {"Idempotency-Key": key} if key else {}
    return client.post("/v1/tokens", body, format="json", headers=headers)


def with_wrong_checksum(token: str) -> str:
    last = token[-1]
    return token[:-1] + ("A" if last != "A" else "B")


def test_create_shows_the_secret_once_and_it_authenticates(alice):
    response = create(alice.client(), {"name": "ci", "expires_in_days": 30})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == TOKEN_FIELDS | {"token"}
    assert NEW_SHAPE.fullmatch(body["token"])
    assert body["prefix"] == body["token"][:16]
    assert response["Location"] == f"/v1/tokens/{body['id']}"
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == alice.user and token.name == "ci"
    assert token.digest == hashlib.sha256(body["token"].encode()).hexdigest()
    assert token.expires_at - token.created_at == timedelta(days=30)
    assert bearer(body["token"]).get("/v1/me").json()["id"] == alice.user.id


def test_the_list_shows_only_the_callers_live_tokens_and_never_a_secret(alice, bob):
    revoked, _ = ApiToken.issue(user=alice.user, name="old")
    ApiToken.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    made = create(alice.client(), {"name": "laptop"}).json()

    response = alice.client().get("/v1/tokens")

    assert response.status_code == 200
    results = response.json()["results"]
    assert [row["name"] for row in results] == ["laptop", "default"]
    assert all(set(row) == TOKEN_FIELDS for row in results)
    assert made["token"] not in response.content.decode()
    assert ApiToken.objects.get(user=bob.user).prefix not in response.content.decode()


def test_a_replayed_create_is_409_naming_the_token_and_makes_no_second_one(alice):
    first = create(alice.client(), {"name": "ci"}, key="k-1")
    replay = create(alice.client(), {"name": "ci"}, key="k-1")
    reused = create(alice.client(), {"name": "other"}, key="k-1")

    token_id = first.json()["id"]
    assert first.status_code == 201
    assert replay.status_code == 409
    detail = assert_problem(replay)["detail"]
    # Named where it can be read: /v1/tokens/{id} has no GET.
    assert f"token {token_id} (GET /v1/tokens lists it)" in detail
    assert f"/v1/tokens/{token_id}" not in detail
    assert first["Location"] == f"/v1/tokens/{token_id}"
    assert first.json()["token"] not in replay.content.decode()
    assert reused.status_code == 422
    assert ApiToken.objects.filter(user=alice.user, name="ci").count() == 1
    key = OperationKey.objects.get(key="k-1")
    assert (key.tenant, key.scope, key.response_body) == (None, f"user:{alice.user.pk}", None)


def test_keys_are_the_users_own(alice, bob):
    assert create(alice.client(), {"name": "a"}, key="same").status_code == 201
    assert create(bob.client(), {"name": "b"}, key="same").status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "x", "expires_in_days": 0}, "expires_in_days"),
        ({"name": 5}, "name"),
        ({"name": "x", "expires_in_days": "5"}, "expires_in_days"),
        ({"name": "x", "expires_in_days": 5.0}, "expires_in_days"),
        ({"name": "x", "expires_in_days": True}, "expires_in_days"),
        ({"name": "x", "expires_in_days": 3651}, "expires_in_days"),
        ({"name": "x", "token": "tkw_mine"}, "token"),
        ({"name": "x", "prefix": "tkw_"}, "prefix"),
        ({"name": "x", "user": 1}, "user"),
    ],
)
def test_bad_creates_are_400_naming_the_field_and_store_nothing(alice, body, field):
    response = create(alice.client(), body, key=str(uuid.uuid4()))

    assert field in assert_problem(response)["errors"]
    assert response.status_code == 400
    assert ApiToken.objects.filter(user=alice.user).count() == 1
    assert not OperationKey.objects.exists()


def test_revoke_makes_the_tokens_next_request_401(alice):
    made = create(alice.client(), {"name": "leaked"}).json()
    client = bearer(made["token"])
    assert client.get("/v1/me").status_code == 200

    response = alice.client().delete(f"/v1/tokens/{made['id']}")

    assert response.status_code == 204
    refused = client.get("/v1/me")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert alice.client().get("/v1/me").status_code == 200  # the other token is untouched


def test_a_token_can_revoke_itself(alice):
    token = ApiToken.objects.get(user=alice.user)

    assert alice.client().delete(f"/v1/tokens/{token.id}").status_code == 204
    assert alice.client().get("/v1/me").status_code == 401


@pytest.mark.parametrize("path", ["{other}", "{revoked}", "99999999", "abc", "\u0661", "1" * 19])
def test_another_users_revoked_missing_or_malformed_token_id_is_404(alice, bob, path):
    revoked, _ = ApiToken.issue(user=alice.user)
    ApiToken.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    bobs = ApiToken.objects.get(user=bob.user)

    response = alice.client().delete("/v1/tokens/" + path.format(other=bobs.id, revoked=revoked.id))

    assert_problem(response)
    assert response.status_code == 404
    assert ApiToken.objects.get(pk=bobs.pk).revoked_at is None


@pytest.mark.parametrize("when", ["expired", "revoked"])
def test_expired_and_revoked_tokens_are_401(alice, when):
    token = ApiToken.objects.get(user=alice.user)
    past = timezone.now() - timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(
        **({"expires_at": past} if when == "expired" else {"revoked_at": past})
    )

    assert alice.client().get("/v1/me").status_code == 401


def test_the_commands_services_mint_the_checksummed_format(alice, bob):
    for token in (alice.token, bob.token):
        assert NEW_SHAPE.fullmatch(token)
        random_part = token[4:44]
        assert token[-6:] == token_format.checksum(random_part)


@pytest.mark.parametrize("random_part", ["0" * 40, "z" * 40, "Ab" * 20])
def test_the_checksum_is_crc32_in_fixed_width_base62(random_part):
    checksum = token_format.checksum(random_part)
    decoded = 0
    for char in checksum:
        decoded = decoded * 62 + token_format.BASE62.index(char)

    assert len(checksum) == 6
    assert decoded == zlib.crc32(random_part.encode())


def test_a_wrong_checksum_is_refused_without_reading_the_database(alice, django_assert_num_queries):
    mistyped = with_wrong_checksum(alice.token)

    with django_assert_num_queries(0), pytest.raises(TokenRejected):
        token_authenticate(plaintext=mistyped, now=timezone.now())


def test_over_http_a_wrong_checksum_costs_only_the_failure_count(alice):
    client = bearer(with_wrong_checksum(alice.token))

    with CaptureQueriesContext(connection) as first:
        assert client.get("/v1/me").status_code == 401
    with CaptureQueriesContext(connection) as second:
        assert client.get("/v1/me").status_code == 401

    # The address's failure counter: its upsert, and on a window's first count the prune
    # of ended windows. The token table is never read.
    assert len(first) == 2 and len(second) == 1
    for query in [*first, *second]:
        assert "tenancy_apitoken" not in query["sql"]
        assert "dbtools_ratewindow" in query["sql"]


def legacy_token(user) -> str:
    """A token as `create_token` minted it before the checksummed format."""
    plaintext = "tkw_0123456789ab_" + "S3cr3t-and_urlsafe" * 2
    ApiToken.objects.create(
        user=user,
        name="legacy",
        prefix=plaintext[:16],
        digest=hashlib.sha256(plaintext.encode()).hexdigest(),
    )
    return plaintext


def test_a_token_of_the_old_format_keeps_working(alice):
    plaintext = legacy_token(alice.user)

    assert bearer(plaintext).get("/v1/me").status_code == 200
    assert bearer(plaintext[:-1] + "X").get("/v1/me").status_code == 401
    legacy = ApiToken.objects.get(name="legacy")
    assert alice.client().delete(f"/v1/tokens/{legacy.id}").status_code == 204
    assert bearer(plaintext).get("/v1/me").status_code == 401


def last_used(token: ApiToken):
    return ApiToken.objects.get(pk=token.pk).last_used_at


def test_last_used_at_is_written_at_most_once_a_minute(alice):
    token = ApiToken.objects.get(user=alice.user)
    now = timezone.now()

    token_authenticate(plaintext=alice.token, now=now)
    assert last_used(token) == now

    with CaptureQueriesContext(connection) as fresh:
        token_authenticate(plaintext=alice.token, now=now + timedelta(seconds=59))
    assert last_used(token) == now
    assert len(fresh) == 1  # the lookup only: no write while the value is fresh

    later = now + timedelta(seconds=61)
    token_authenticate(plaintext=alice.token, now=later)
    assert last_used(token) == later


def test_the_write_is_conditional_so_racing_requests_write_it_once(alice):
    token = ApiToken.objects.get(user=alice.user)
    now = timezone.now()
    # Another request wrote it a moment ago, after this one read the stale value.
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now - timedelta(seconds=10))

    stale = ApiToken.objects.get(pk=token.pk)
    stale.last_used_at = now - timedelta(minutes=5)
    _note_use(stale, now)

    assert last_used(token) == now - timedelta(seconds=10)


def test_no_token_reaches_a_log_line_or_a_problem_body(alice, caplog):
    caplog.set_level(logging.DEBUG)
    made = create(alice.client(), {"name": "ci"}).json()["token"]
    secrets_sent = [made, with_wrong_checksum(made), alice.token]

    answers = [bearer(secret).get("/v1/tokens/nope") for secret in secrets_sent]
    answers.append(bearer(with_wrong_checksum(made)).get("/v1/me"))

    for secret in secrets_sent:
        assert secret not in caplog.text
        assert secret[16:] not in caplog.text
        for answer in answers:
            assert secret not in answer.content.decode()
