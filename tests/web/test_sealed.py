"""Webhook signing secrets at rest (README: Account emails and secrets at rest): stored sealed under
a key derived from SECRET_KEY, read back plain by the product, opened by a fallback key after a
rotation of SECRET_KEY, never by another key, and absent in plain from every stored column."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from delivery.models import WebhookEndpoint
from tests.support.stored import stored_values
from web.sealed import PREFIX, UnsealError, is_sealed, seal, unseal
from webhooks.endpoints import webhook_endpoint_rotate_secret

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_a_sealed_value_opens_to_itself_and_is_new_each_time():
    first, second = seal(SECRET), seal(SECRET)

    assert (unseal(first), unseal(second)) == (SECRET, SECRET)
    assert first != second
    assert first.startswith(PREFIX) and SECRET not in first


def test_after_a_rotation_of_secret_key_the_old_key_as_a_fallback_still_opens(settings):
    sealed = seal(SECRET)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-for-this-test-only"

    assert unseal(sealed) == SECRET
    assert unseal(seal(SECRET)) == SECRET


def test_another_key_opens_nothing(settings):
    sealed = seal(SECRET)
    settings.SECRET_KEY = "a-new-secret-key-for-this-test-only"

    with pytest.raises(UnsealError, match="neither SECRET_KEY nor a fallback"):
        unseal(sealed)


def test_a_changed_byte_opens_nothing():
    sealed = seal(SECRET)
    changed = sealed[:-2] + ("B" if sealed[-2] == "A" else "A") + sealed[-1]

    with pytest.raises(UnsealError, match="does not open"):
        unseal(changed)


@pytest.mark.django_db
def test_no_signing_secret_is_stored_in_plain_and_the_product_reads_it(alice, public_dns):
    created = alice.client().post(
        "/v1/webhook-endpoints",
        {"url": "https://hooks.example.com/in"},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert created.status_code == 201
    shown = created.json()["secret"]
    endpoint_id = created.json()["id"]
    rotated = webhook_endpoint_rotate_secret(
        tenant=alice.tenant, endpoint_id=endpoint_id, now=datetime(2026, 1, 1, tzinfo=UTC)
    )

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT secret, retired_secrets FROM notifications_webhookendpoint WHERE id = %s",
            [uuid.UUID(endpoint_id).hex if connection.vendor == "sqlite" else endpoint_id],
        )
        stored_secret, stored_retired = cursor.fetchone()
    assert is_sealed(stored_secret)
    assert PREFIX in str(stored_retired)
    plain = {shown, rotated.secret}
    assert {(table, s) for table, value in stored_values() for s in plain if s in value} == set()
    endpoint = WebhookEndpoint.objects.get(pk=endpoint_id)
    in_grace = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=1)
    assert endpoint.signing_secrets(now=in_grace) == [rotated.secret, shown]
