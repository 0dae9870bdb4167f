"""Identical notification creates racing on real PostgreSQL connections: one notification."""

import threading

import pytest
from django.db import connection

from notifications.models import Notification
from tenancy.models import OperationKey
from tests.conftest import requires_postgres

RACERS = 8
EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_identical_notification_creates_make_one_notification(alice):
    barrier = threading.Barrier(RACERS)
    answers: list[tuple[int, bytes, str | None]] = []
    lock = threading.Lock()

    def race() -> None:
        try:
            client = alice.client()
            barrier.wait(timeout=30)
            response = client.post(
                "/v1/notifications", EMAIL, format="json", headers={"Idempotency-Key": "race"}
            )
            with lock:
                answers.append(
                    (response.status_code, response.content, response.get("Idempotent-Replayed"))
                )
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert (Notification.objects.count(), OperationKey.objects.count()) == (1, 1)
    assert [status for status, _, _ in answers] == [201] * RACERS
    # Every loser answers the winner's stored bytes.
    assert len({content for _, content, _ in answers}) == 1
    assert sorted(replayed or "" for _, _, replayed in answers) == [""] + ["true"] * (RACERS - 1)
