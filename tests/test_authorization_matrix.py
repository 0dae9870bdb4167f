"""Every route of the projects, jobs and me APIs against every caller and target."""

import uuid

import pytest

from jobs.models import Job
from tests.authz import RouteSpec, build_world, check_case, matrix_cases
from tests.projects.factories import make_project


def _project_id(actor):
    return make_project(actor).id


def _job_id(actor):
    return Job.objects.get(project=make_project(actor)).id


ROUTES = [
    RouteSpec(
        "POST",
        "/v1/projects",
        success=202,
        body=lambda: {"name": "Matrix"},
        headers=lambda: {"Idempotency-Key": str(uuid.uuid4())},
    ),
    RouteSpec("GET", "/v1/projects", create=_project_id),
    RouteSpec("GET", "/v1/projects/{id}", create=_project_id),
    RouteSpec("GET", "/v1/jobs", create=_job_id),
    RouteSpec("GET", "/v1/jobs?status=pending", create=_job_id),
    RouteSpec("GET", "/v1/jobs/{id}", create=_job_id),
    RouteSpec("GET", "/v1/me"),
]


@pytest.mark.parametrize(("route", "principal", "target"), matrix_cases(ROUTES))
def test_authorization_matrix(route, principal, target, alice, bob, charlie):
    check_case(route, principal, target, build_world(alice, bob, charlie))


def test_selecting_a_tenant_you_do_not_belong_to_is_403_and_reveals_nothing(alice, charlie):
    project = make_project(alice)
    client = charlie.client(tenant=alice.tenant)

    for path in ("/v1/projects", f"/v1/projects/{project.id}", "/v1/jobs"):
        response = client.get(path)

        assert response.status_code == 403
        assert str(project.id) not in response.content.decode()
