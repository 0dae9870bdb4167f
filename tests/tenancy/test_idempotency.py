"""Idempotency-Key on every POST of the API: one mechanism, keyed by (tenant, key)."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError
from django.utils import timezone
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from delivery.models import Notification, WebhookEndpoint
from delivery.transports.signing import generate_secret, sign
from jobs.models import Job, JobStatus
from notifications import services
from projects.models import Project
from tenancy.models import OperationKey
from tests.delivery.factories import make_endpoint, make_notification
from tests.jobs.factories import make_job

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}
HOOK = "https://hooks.example.com/in"


def post(actor, path, body=None, *, key="key-1", tenant=None):
    headers = {} if key is None else {"Idempotency-Key": key}
    return actor.client(tenant=tenant).post(path, body, format="json", headers=headers)


def answer_headers(response):
    return {name: response.get(name) for name in ("Content-Type", "Location")}


@pytest.mark.parametrize(
    ("path", "body", "model"),
    [("/v1/projects", {"name": "P", "invite": []}, Project), ("/v1/notifications", EMAIL, None)],
)
def test_a_replay_answers_the_first_status_headers_and_bytes(alice, path, body, model):
    first = post(alice, path, body)
    # The same body spelt with its keys in another order is the same request.
    replay = post(alice, path, dict(reversed(list(body.items()))))

    assert first.status_code in (201, 202)
    assert replay.status_code == first.status_code
    assert replay.content == first.content
    assert answer_headers(replay) == answer_headers(first)
    assert first.get("Idempotent-Replayed") is None
    assert replay["Idempotent-Replayed"] == "true"
    assert (model or Notification).objects.count() == 1
    assert bytes(OperationKey.objects.get().response_body) == first.content


def test_a_notification_replay_schedules_nothing_more(alice):
    first = post(alice, "/v1/notifications", EMAIL)
    Notification.objects.filter(pk=first.json()["id"]).update(subject="changed since")

    replay = post(alice, "/v1/notifications", EMAIL)

    assert replay.content == first.content
    assert list(Notification.objects.values_list("subject", flat=True)) == ["changed since"]


def test_the_same_key_with_another_request_is_422_and_changes_nothing(alice):
    post(alice, "/v1/notifications", EMAIL)

    other_body = post(alice, "/v1/notifications", {**EMAIL, "subject": "Other"})
    other_path = post(alice, "/v1/webhook-endpoints", {"url": HOOK})

    assert other_body.status_code == other_path.status_code == 422
    assert other_body["Content-Type"] == "application/problem+json"
    assert other_body.json()["type"].endswith("/idempotency-key-reused")
    assert (Notification.objects.count(), WebhookEndpoint.objects.count()) == (1, 0)


def test_a_notification_create_without_a_key_is_400_and_creates_nothing(alice):
    response = post(alice, "/v1/notifications", EMAIL, key=None)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "Idempotency-Key" in response.json()["errors"]
    assert (Notification.objects.count(), OperationKey.objects.count()) == (0, 0)


@pytest.mark.parametrize("key", ["", '""', "k" * 256, '"open'])
def test_an_empty_overlong_or_malformed_key_is_400_on_every_post(alice, key):
    endpoint = make_endpoint(tenant=alice.tenant, url=HOOK)
    requests = [
        ("/v1/notifications", EMAIL),
        ("/v1/webhook-endpoints", {"url": HOOK}),
        (f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret", None),
    ]
    for path, body in requests:
        response = post(alice, path, body, key=key)
        assert (path, response.status_code) == (path, 400)
        assert "Idempotency-Key" in response.json()["errors"]
    assert WebhookEndpoint.objects.get().secret == endpoint.secret
    assert (Notification.objects.count(), OperationKey.objects.count()) == (0, 0)


def test_quoted_and_bare_keys_are_the_same_key(alice):
    first = post(alice, "/v1/notifications", EMAIL, key="abc")
    replay = post(alice, "/v1/notifications", EMAIL, key='"abc"')

    assert replay.content == first.content
    assert replay["Idempotent-Replayed"] == "true"
    assert OperationKey.objects.get().key == "abc"


def test_keys_are_scoped_per_tenant(alice, charlie):
    for actor in (alice, charlie):
        make_endpoint(tenant=actor.tenant, url=HOOK)
    mine = post(alice, "/v1/notifications", EMAIL, key="shared")
    theirs = post(charlie, "/v1/notifications", EMAIL, key="shared")

    assert mine.status_code == theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs
    assert mine.json()["id"] != theirs.json()["id"]
    assert set(Notification.objects.values_list("tenant_id", flat=True)) == {
        alice.tenant.id,
        charlie.tenant.id,
    }


def test_a_request_refused_before_the_create_stores_nothing_and_the_key_stays_usable(
    alice, charlie
):
    unknown_endpoint = {**EMAIL, "channels": ["webhook"], "webhook_endpoint": str(uuid.uuid4())}
    invalid = post(alice, "/v1/notifications", unknown_endpoint)
    foreign = post(charlie, "/v1/notifications", EMAIL, tenant=alice.tenant)

    assert (invalid.status_code, foreign.status_code) == (400, 403)
    assert OperationKey.objects.count() == 0
    assert post(alice, "/v1/notifications", EMAIL).status_code == 201


def test_an_expired_key_creates_afresh(alice):
    first = post(alice, "/v1/notifications", EMAIL)
    OperationKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    again = post(alice, "/v1/notifications", EMAIL)

    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert again.json()["id"] != first.json()["id"]
    assert OperationKey.objects.get().expires_at > timezone.now() + timedelta(hours=23)


def test_another_integrity_error_is_a_500_not_a_replay(alice, monkeypatch):
    def broken(**kwargs):
        raise IntegrityError("notifications_notification violates something")

    monkeypatch.setattr(services, "notification_create", broken)
    client = alice.client()
    client.raise_request_exception = False

    response = client.post(
        "/v1/notifications", EMAIL, format="json", headers={"Idempotency-Key": "k"}
    )

    assert response.status_code == 500
    assert "Idempotent-Replayed" not in response
    assert "violates" not in response.content.decode()
    assert OperationKey.objects.count() == 0


def test_without_a_key_an_accepting_post_works_and_stores_nothing(alice, public_dns):
    response = post(alice, "/v1/webhook-endpoints", {"url": HOOK}, key=None)

    assert response.status_code == 201
    assert OperationKey.objects.count() == 0


def _no_secret_in_the_key_table(*secrets):
    for row in OperationKey.objects.values():
        assert row["response_body"] is None
        stored = repr(row)
        assert not any(secret in stored for secret in secrets)


def test_an_endpoint_create_replays_as_a_409_naming_the_endpoint_without_its_secret(
    alice, public_dns
):
    first = post(alice, "/v1/webhook-endpoints", {"url": HOOK})

    replay = post(alice, "/v1/webhook-endpoints", {"url": HOOK})

    endpoint = WebhookEndpoint.objects.get()
    assert first.status_code == 201 and first.json()["secret"] == endpoint.secret
    assert replay.status_code == 409
    assert replay["Content-Type"] == "application/problem+json"
    assert f"/v1/webhook-endpoints/{endpoint.id}" in replay.json()["detail"]
    assert "whsec_" not in replay.content.decode()
    _no_secret_in_the_key_table(endpoint.secret)
    key = OperationKey.objects.get()
    assert (key.resource, key.response_status) == (f"/v1/webhook-endpoints/{endpoint.id}", 201)


def test_a_rotation_sent_again_with_its_key_rotates_nothing_and_is_409(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=HOOK)
    path = f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret"

    first = post(alice, path, key="rotate-1")
    again = post(alice, path, key="rotate-1")

    row = WebhookEndpoint.objects.get()
    assert first.status_code == 200 and first.json()["secret"] == row.secret
    assert again.status_code == 409
    assert path.removesuffix("/rotate-secret") in again.json()["detail"]
    assert [entry["secret"] for entry in row.retired_secrets] == [endpoint.secret]
    _no_secret_in_the_key_table(endpoint.secret, row.secret)


def test_a_retry_replays_its_answer_even_once_the_row_is_healthy_again(alice):
    notification = make_notification(
        tenant=alice.tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        next_fire_at=None,
        error_count=3,
        dead_letter_reason="exhausted",
    )
    path = f"/v1/notifications/{notification.id}/retry"

    first = post(alice, path)
    replay = post(alice, path)
    fresh = post(alice, path, key="another")

    assert (first.status_code, replay.status_code, fresh.status_code) == (200, 200, 409)
    assert replay.content == first.content
    assert replay["Idempotent-Replayed"] == "true"
    assert Notification.objects.get().claim_token == notification.claim_token + 1


def test_a_job_retry_with_a_key_runs_once(alice):
    job = make_job(alice.tenant, status=JobStatus.DEAD_LETTERED, attempts=5)
    path = f"/v1/jobs/{job.id}/retry"

    first = post(alice, path)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.DEAD_LETTERED, attempts=5)
    replay = post(alice, path)

    assert first.status_code == replay.status_code == 200
    assert replay.content == first.content
    assert replay["Idempotent-Replayed"] == "true"
    assert Job.objects.get().status == JobStatus.DEAD_LETTERED


@pytest.mark.parametrize("state_fields", [{}, {"error_count": 0, "claim_token": 3}])
def test_retry_of_a_healthy_scheduled_row_is_409_and_touches_nothing(alice, state_fields):
    due = timezone.now() + timedelta(days=1500)
    notification = make_notification(tenant=alice.tenant, next_fire_at=due, **state_fields)
    before = Notification.objects.values().get()

    response = post(alice, f"/v1/notifications/{notification.id}/retry")

    assert response.status_code == 409
    assert response.json()["type"].endswith("/notification-not-retryable")
    assert "scheduled" in response.json()["detail"]
    assert Notification.objects.values().get() == before
    assert OperationKey.objects.count() == 0


def test_two_rotations_within_the_grace_leave_every_earlier_secret_verifying(alice, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 3600
    endpoint = make_endpoint(tenant=alice.tenant, url=HOOK)
    path = f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret"
    first = post(alice, path, key="rotation-1").json()["secret"]
    second = post(alice, path, key="rotation-2").json()["secret"]
    row = WebhookEndpoint.objects.get()
    body = b'{"type":"notification.fired"}'
    timestamp = int(timezone.now().timestamp())
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(
            secrets=row.signing_secrets(now=timezone.now()),
            msg_id="msg_1",
            timestamp=timestamp,
            body=body,
        ),
    }

    for secret in (second, first, endpoint.secret):
        assert Webhook(secret).verify(body, headers) == {"type": "notification.fired"}
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(body, headers)
