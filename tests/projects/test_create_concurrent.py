"""Identical creates racing on real connections: exactly one project and one job."""

import threading

import pytest
from django.db import connection

from jobs.models import Job
from projects.models import Project
from tenancy.models import OperationKey
from tests.conftest import requires_postgres

RACERS = 8


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_identical_creates_make_one_project(alice):
    barrier = threading.Barrier(RACERS)
    answers: list[tuple[int, dict, str | None]] = []
    lock = threading.Lock()

    def race() -> None:
        try:
            client = alice.client()
            barrier.wait()
            response = client.post(
                "/v1/projects", {"name": "Race"}, format="json", headers={"Idempotency-Key": "r"}
            )
            with lock:
                answers.append(
                    (response.status_code, response.json(), response.get("Idempotent-Replayed"))
                )
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (Project.objects.count(), Job.objects.count(), OperationKey.objects.count()) == (1, 1, 1)
    assert [status for status, _, _ in answers] == [202] * RACERS
    assert {body["id"] for _, body, _ in answers} == {str(Project.objects.get().id)}
    assert sorted(replayed or "" for _, _, replayed in answers) == [""] + ["true"] * (RACERS - 1)
