"""What people decide for the rows the tick claimed: people's `on_claimed` hook."""

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from delivery.hooks import SendDecision
from delivery.models import Notification
from people import digests, preferences


def on_claimed(rows: Sequence[Notification], now: datetime) -> dict[Any, SendDecision]:
    """Each digest's email (its subject and listing), and each row's recipients applied."""
    emails = digests.rendered(rows, now=now)
    decided = preferences.decisions(rows, now=now)
    for row_id, email in emails.items():
        decided[row_id] = replace(
            decided.get(row_id, SendDecision()), subject=email.subject, body=email.body
        )
    return decided
