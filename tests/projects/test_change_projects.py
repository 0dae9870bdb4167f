"""PATCH /v1/projects/{id} (rename) and DELETE /v1/projects/{id}, with the provision job's
fate: a pending one is cancelled, a running one finishes and is discarded."""

import json

import pytest
from django.utils import timezone

from dbqueue.clock import Clock
from delivery.models import Notification
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import Job
from jobs.processing import jobs_process
from jobs.services import Outcome
from projects.models import Project
from tests.jobs.factories import make_endpoint
from tests.projects.factories import make_project


def test_an_owner_and_a_member_rename_a_project(alice, bob):
    project = make_project(alice)

    for actor, name in ((alice, "Renamed"), (bob, "Again")):
        response = actor.client().patch(f"/v1/projects/{project.id}", {"name": name}, format="json")

        assert response.status_code == 200
        body = response.json()
        assert body["name"] == name
        assert body["id"] == str(project.id)
        assert body["job"]["id"] == str(project.jobs.get().id)
    project.refresh_from_db()
    assert project.name == "Again"
    assert project.updated_at > project.created_at
    assert alice.client().get(f"/v1/projects/{project.id}").json()["name"] == "Again"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": 5}, "name"),
        ({"name": "A", "status": "active"}, "status"),
    ],
)
def test_a_bad_rename_is_400_naming_the_field_and_changes_nothing(alice, body, field):
    project = make_project(alice, name="Kept")

    response = alice.client().patch(f"/v1/projects/{project.id}", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    project.refresh_from_db()
    assert project.name == "Kept"


def test_another_tenants_project_is_404_to_rename_and_delete_and_stays(alice, charlie):
    project = make_project(alice, name="Kept")
    client = charlie.client()

    assert (
        client.patch(f"/v1/projects/{project.id}", {"name": "X"}, format="json").status_code == 404
    )
    assert client.delete(f"/v1/projects/{project.id}").status_code == 404
    project.refresh_from_db()
    assert project.name == "Kept"


def test_a_member_may_not_delete_a_project(alice, bob):
    project = make_project(alice)

    assert bob.client().delete(f"/v1/projects/{project.id}").status_code == 403
    assert Project.objects.filter(pk=project.pk).exists()


def test_deleting_a_project_cancels_its_pending_job_and_a_second_delete_is_404(alice):
    project = make_project(alice)
    job = project.jobs.get()
    client = alice.client()

    first = client.delete(f"/v1/projects/{project.id}")
    second = client.delete(f"/v1/projects/{project.id}")

    assert first.status_code == 204
    assert first.content == b""
    assert second.status_code == 404
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Job.objects.filter(pk=job.pk).exists()
    assert client.get(f"/v1/projects/{project.id}").status_code == 404
    assert client.get(f"/v1/jobs/{job.id}").status_code == 404
    # The cancelled job is never run: a drain finds nothing.
    summary = jobs_drain(clock=Clock(now=timezone.now()), limit=10, max_seconds=10)
    assert summary.claimed == 0


def test_a_running_job_finishes_and_is_discarded_when_its_project_is_deleted(alice, settings):
    # Configured, but never called: the project is gone by the time the job runs.
    settings.PROVISIONING_URL = "http://127.0.0.1:9/provision"
    make_endpoint(alice.tenant)
    project = make_project(alice)
    now = timezone.now()
    [job] = jobs_claim(now=now, limit=1)

    assert alice.client().delete(f"/v1/projects/{project.id}").status_code == 204
    outcomes = jobs_process([job], clock=Clock(now=now), should_stop=lambda: False)

    assert outcomes == [Outcome.FENCED_OUT]
    assert not Job.objects.filter(pk=job.pk).exists()
    assert not Project.objects.filter(pk=project.pk).exists()
    # Nothing of its result applied: no activation event, no invitation e-mail (only the
    # project.created message the create published).
    left = Notification.objects.filter(tenant=alice.tenant)
    assert set(left.values_list("message__event_type", flat=True)) == {"project.created"}


def test_a_projects_notifications_outlive_it_without_a_project(alice):
    project = make_project(alice)
    response = alice.client().post(
        "/v1/notifications",
        {
            "channels": ["email"],
            "email_to": ["a@example.com"],
            "subject": "S",
            "body": "B",
            "project_id": str(project.id),
        },
        format="json",
        headers={"Idempotency-Key": "n1"},
    )
    assert response.status_code == 201

    assert alice.client().delete(f"/v1/projects/{project.id}").status_code == 204

    notification = Notification.objects.get(pk=response.json()["id"])
    assert notification.project_id is None


def test_a_replayed_create_of_a_deleted_project_answers_the_original_bytes(alice):
    client = alice.client()
    headers = {"Idempotency-Key": "create-1"}
    created = client.post("/v1/projects", {"name": "A"}, format="json", headers=headers)
    project_id = json.loads(created.content)["id"]
    assert client.delete(f"/v1/projects/{project_id}").status_code == 204

    replay = client.post("/v1/projects", {"name": "A"}, format="json", headers=headers)

    assert replay.status_code == 202
    assert replay.content == created.content
    assert replay["Idempotent-Replayed"] == "true"
    assert not Project.objects.exists()
