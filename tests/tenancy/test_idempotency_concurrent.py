"""Identical notification creates racing on real PostgreSQL connections: one notification."""

import pytest

from delivery.models import Notification
from tenancy.models import OperationKey
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together

RACERS = 8
EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_identical_notification_creates_make_one_notification(alice):
    def race() -> tuple[int, bytes, str | None]:
        response = alice.client().post(
            "/v1/notifications", EMAIL, format="json", headers={"Idempotency-Key": "race"}
        )
        return response.status_code, response.content, response.get("Idempotent-Replayed")

    answers = run_together([race] * RACERS)

    assert (Notification.objects.count(), OperationKey.objects.count()) == (1, 1)
    assert [status for status, _, _ in answers] == [201] * RACERS
    # Every loser answers the winner's stored bytes.
    assert len({content for _, content, _ in answers}) == 1
    assert sorted(replayed or "" for _, _, replayed in answers) == [""] + ["true"] * (RACERS - 1)
