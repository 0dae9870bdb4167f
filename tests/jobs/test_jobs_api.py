"""GET /v1/jobs?status= and GET /v1/jobs/{id}: the status endpoints."""

import pytest
from django.utils import timezone

from tests.projects.factories import make_job

JOB_FIELDS = {
    "id",
    "project_id",
    "kind",
    "status",
    "attempts",
    "max_attempts",
    "next_attempt_at",
    "last_error_category",
    "last_error",
    "last_attempt_at",
    "created_at",
    "completed_at",
}


def test_detail_has_the_design_shape(alice):
    job = make_job(alice, status="dead_lettered", attempts=5, last_error_category="http_5xx")

    response = alice.client().get(f"/v1/jobs/{job.id}")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == JOB_FIELDS | {"attempt_history"}
    assert (body["id"], body["project_id"]) == (str(job.id), str(job.project_id))
    assert (body["status"], body["attempts"], body["last_error_category"]) == (
        "dead_lettered",
        5,
        "http_5xx",
    )


def test_a_finished_job_reports_a_null_next_attempt(alice):
    job = make_job(alice, status="completed", next_attempt_at=None, completed_at=timezone.now())

    body = alice.client().get(f"/v1/jobs/{job.id}").json()

    assert body["next_attempt_at"] is None


def test_list_filters_by_status_newest_first(alice):
    failed = make_job(alice, status="dead_lettered")
    make_job(alice, status="completed", completed_at=timezone.now())
    newer_failed = make_job(alice, status="dead_lettered")

    response = alice.client().get("/v1/jobs?status=dead_lettered")

    assert response.status_code == 200
    assert [j["id"] for j in response.json()["results"]] == [str(newer_failed.id), str(failed.id)]


@pytest.mark.parametrize(
    ("former", "status"), [("failed", "dead_lettered"), ("enqueued", "running")]
)
def test_the_former_status_names_still_filter(alice, former, status):
    wanted = make_job(alice, status=status)
    make_job(alice, status="completed", completed_at=timezone.now())

    response = alice.client().get(f"/v1/jobs?status={former}")

    assert response.status_code == 200
    assert [j["id"] for j in response.json()["results"]] == [str(wanted.id)]
    assert response.json()["results"][0]["status"] == status


def test_list_without_status_returns_every_job(alice):
    jobs = [make_job(alice), make_job(alice, status="completed")]

    results = alice.client().get("/v1/jobs").json()["results"]

    assert {j["id"] for j in results} == {str(j.id) for j in jobs}


def test_unknown_status_is_a_400_problem(alice):
    response = alice.client().get("/v1/jobs?status=exploded")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "status" in response.json()["errors"]


def test_outsider_gets_404_and_an_empty_list(alice, charlie):
    job = make_job(alice)
    client = charlie.client()

    assert client.get(f"/v1/jobs/{job.id}").status_code == 404
    assert client.get("/v1/jobs").json()["results"] == []


def test_non_uuid_id_is_404(alice):
    assert alice.client().get("/v1/jobs/123").status_code == 404


def test_a_job_without_an_error_reports_null_error_fields(alice):
    job_id = (
        alice.client()
        .post("/v1/projects", {"name": "Fresh"}, format="json", HTTP_IDEMPOTENCY_KEY="fresh")
        .json()["job"]["id"]
    )

    body = alice.client().get(f"/v1/jobs/{job_id}").json()

    assert body["status"] == "pending"
    assert body["last_error_category"] is None
    assert body["last_error"] is None
