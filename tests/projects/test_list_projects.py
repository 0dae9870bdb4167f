"""GET /v1/projects and GET /v1/projects/{id}."""

from datetime import timedelta

from django.utils import timezone

from projects.models import Project
from tests.projects.factories import make_project


def make_dated_projects(actor, count):
    """Projects one minute apart, oldest first; returns their ids newest first."""
    base = timezone.now() - timedelta(hours=1)
    ids = []
    for index in range(count):
        project = make_project(actor, name=f"P{index}")
        Project.objects.filter(pk=project.pk).update(created_at=base + timedelta(minutes=index))
        ids.append(str(project.id))
    return ids[::-1]


def test_list_is_newest_first_and_cursor_paginated(alice):
    expected = make_dated_projects(alice, 5)
    client = alice.client()

    first = client.get("/v1/projects?limit=2").json()
    second = client.get(first["next"]).json()
    third = client.get(second["next"]).json()

    assert set(first) == {"results", "next", "previous"}
    assert first["previous"] is None
    seen = [p["id"] for page in (first, second, third) for p in page["results"]]
    assert seen == expected
    assert third["next"] is None
    assert [p["id"] for p in client.get(third["previous"]).json()["results"]] == expected[2:4]


def test_list_shows_each_project_with_its_job(alice):
    project = make_project(alice)
    job = project.jobs.get()

    (item,) = alice.client().get("/v1/projects").json()["results"]

    assert item["job"] == {"id": str(job.id), "status": "pending"}
    assert item["name"] == project.name


def test_page_size_above_the_cap_is_400(alice):
    make_dated_projects(alice, 3)

    response = alice.client().get("/v1/projects?limit=101")

    assert response.status_code == 400
    assert "limit" in response.json()["errors"]


def test_a_garbled_cursor_is_400(alice):
    response = alice.client().get("/v1/projects?cursor=%%%garbage")

    assert response.status_code == 400
    assert "cursor" in response.json()["errors"]


def test_outsider_sees_none_of_the_tenants_projects(alice, charlie):
    make_project(alice)

    assert charlie.client().get("/v1/projects").json()["results"] == []


def test_detail_has_the_design_shape(alice):
    project = make_project(alice)

    response = alice.client().get(f"/v1/projects/{project.id}")

    assert response.status_code == 200
    assert set(response.json()) == {"id", "name", "status", "created_at", "updated_at", "job"}


def test_detail_of_another_tenant_is_404_like_a_missing_one(alice, charlie):
    project = make_project(alice)

    response = charlie.client().get(f"/v1/projects/{project.id}")

    assert response.status_code == 404
    assert str(project.id) not in response.content.decode()


def test_non_uuid_id_is_a_404_problem(alice):
    response = alice.client().get("/v1/projects/not-a-uuid")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
