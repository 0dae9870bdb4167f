"""What people decide for the rows the tick claimed: people's `on_claimed` hook."""

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from delivery.hooks import SendDecision
from delivery.models import Notification
from people import digests, preferences


def on_claimed(rows: Sequence[Notification], now: datetime) -> dict[Any, SendDecision]:
    """Each digest's listing as its email's body, and each row's recipients applied."""
    bodies = digests.rendered_bodies(rows, now=now)
    decided = preferences.decisions(rows, now=now)
    for row_id, body in bodies.items():
        decided[row_id] = replace(decided.get(row_id, SendDecision()), body=body)
    return decided
