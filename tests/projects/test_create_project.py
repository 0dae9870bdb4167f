"""POST /v1/projects: one transaction, idempotent per (tenant, key)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from projects.models import Project
from tenancy.models import OperationKey

URL = "/v1/projects"


def post(actor, body, key="key-1"):
    headers = {} if key is None else {"Idempotency-Key": key}
    return actor.client().post(URL, body, format="json", headers=headers)


def counts():
    return Project.objects.count(), Job.objects.count(), OperationKey.objects.count()


def test_first_request_writes_one_project_one_job_one_key(alice, settings):
    settings.JOB_MAX_ATTEMPTS = 7
    response = post(alice, {"name": "Website relaunch", "invite": ["dan@example.com"]})

    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"id", "name", "status", "created_at", "updated_at", "job"}
    assert body["status"] == "provisioning"
    assert response["Location"] == f"/v1/projects/{body['id']}"
    assert "Idempotent-Replayed" not in response
    assert counts() == (1, 1, 1)
    project = Project.objects.get()
    job = Job.objects.get()
    assert (str(project.id), project.tenant, project.created_by) == (
        body["id"],
        alice.tenant,
        alice.user,
    )
    assert body["job"] == {"id": str(job.id), "status": "pending"}
    assert (job.kind, job.status, job.max_attempts, job.tenant) == (
        "provision",
        "pending",
        7,
        alice.tenant,
    )
    assert job.payload == {"invite": ["dan@example.com"]}
    # the answer is the project resource exactly as GET renders it
    assert alice.client().get(response["Location"]).json() == body


def test_invite_defaults_to_an_empty_list(alice):
    assert post(alice, {"name": "P"}).status_code == 202
    assert Job.objects.get().payload == {"invite": []}


def test_replay_returns_the_same_answer_and_writes_nothing(alice, bob):
    first = post(alice, {"name": "P"})
    # A teammate retrying the same key in the same tenant gets the same outcome.
    replay = post(bob, {"name": "P"})

    assert replay.status_code == first.status_code == 202
    assert replay.json() == first.json()
    assert replay["Idempotent-Replayed"] == "true"
    assert replay["Location"] == first["Location"]
    assert counts() == (1, 1, 1)


def test_quoted_and_bare_keys_are_the_same_key(alice):
    first = post(alice, {"name": "P"}, key="abc")
    replay = post(alice, {"name": "P"}, key='"abc"')

    assert replay.json()["id"] == first.json()["id"]
    assert replay["Idempotent-Replayed"] == "true"
    assert OperationKey.objects.get().key == "abc"


def test_same_key_with_another_body_is_422(alice):
    post(alice, {"name": "P"})
    response = post(alice, {"name": "Q"})

    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith("/idempotency-key-reused")
    assert counts() == (1, 1, 1)


def test_a_retry_spelling_the_default_out_replays(alice):
    first = post(alice, {"name": "P"})
    replay = post(alice, {"invite": [], "name": "P"})

    assert replay.status_code == 202
    assert replay.json() == first.json()
    assert replay["Idempotent-Replayed"] == "true"
    assert counts() == (1, 1, 1)


def test_keys_are_scoped_per_tenant(alice, charlie):
    a = post(alice, {"name": "P"}, key="shared")
    b = post(charlie, {"name": "P"}, key="shared")

    assert a.status_code == b.status_code == 202
    assert a.json()["id"] != b.json()["id"]
    assert "Idempotent-Replayed" not in b
    assert counts() == (2, 2, 2)


def test_an_expired_key_creates_afresh(alice):
    first = post(alice, {"name": "P"})
    OperationKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    again = post(alice, {"name": "Other"})

    assert again.status_code == 202
    assert "Idempotent-Replayed" not in again
    assert again.json()["id"] != first.json()["id"]
    assert counts() == (2, 2, 1)
    assert OperationKey.objects.get().expires_at > timezone.now() + timedelta(hours=23)


@pytest.mark.parametrize(
    ("key", "reason"),
    [(None, "required"), ("", "empty"), ('""', "empty"), ("k" * 256, "255")],
)
def test_bad_keys_are_400_and_store_nothing(alice, key, reason):
    response = post(alice, {"name": "P"}, key=key)

    assert response.status_code == 400
    assert reason in response.json()["detail"]
    assert "Idempotency-Key" in response.json()["errors"]
    assert counts() == (0, 0, 0)


def test_validation_failure_stores_nothing_so_the_key_can_be_retried(alice):
    assert post(alice, {"name": ""}).status_code == 400
    assert counts() == (0, 0, 0)

    assert post(alice, {"name": "Fixed"}).status_code == 202


def test_unauthorized_requests_store_nothing(alice, charlie, anonymous):
    anonymous.post(URL, {"name": "P"}, format="json", headers={"Idempotency-Key": "k"})
    charlie.client(tenant=alice.tenant).post(
        URL, {"name": "P"}, format="json", headers={"Idempotency-Key": "k"}
    )

    assert counts() == (0, 0, 0)


def test_another_integrity_error_is_a_500_not_a_replay(alice, settings):
    # The job row breaks its own CHECK constraint (max_attempts >= 0) after the key went in.
    settings.JOB_MAX_ATTEMPTS = -1
    client = alice.client()
    client.raise_request_exception = False

    response = client.post(URL, {"name": "P"}, format="json", headers={"Idempotency-Key": "k"})

    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    assert "max_attempts" not in response.content.decode()
    assert "Idempotent-Replayed" not in response
    assert counts() == (0, 0, 0)
