"""The one door producers put sends through."""

from datetime import datetime
from typing import Any

from delivery.models import Notification
from delivery.states import Move, after


def one_shot_due(now: datetime, **fields: Any) -> Notification:
    """An unsaved one-shot notification due at `now`, as the product's producers make them
    (their announcements' e-mails, a message's deliveries): `fields` say what it sends."""
    return Notification(
        next_fire_at=now,
        due_at=now,
        recurrence_anchor=now,
        occurrence=1,
        state=after(None, Move.CREATE),
        timezone="UTC",
        created_at=now,
        updated_at=now,
        **fields,
    )
