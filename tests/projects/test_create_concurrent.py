"""Identical creates racing on real connections: exactly one project and one job."""

import pytest

from jobs.models import Job
from projects.models import Project
from tenancy.models import OperationKey
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together

RACERS = 8


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_identical_creates_make_one_project(alice):
    def race() -> tuple[int, dict, str | None]:
        response = alice.client().post(
            "/v1/projects", {"name": "Race"}, format="json", headers={"Idempotency-Key": "r"}
        )
        return response.status_code, response.json(), response.get("Idempotent-Replayed")

    answers = run_together([race] * RACERS)

    assert (Project.objects.count(), Job.objects.count(), OperationKey.objects.count()) == (1, 1, 1)
    assert [status for status, _, _ in answers] == [202] * RACERS
    assert {body["id"] for _, body, _ in answers} == {str(Project.objects.get().id)}
    assert sorted(replayed or "" for _, _, replayed in answers) == [""] + ["true"] * (RACERS - 1)
