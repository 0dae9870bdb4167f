"""Pacing: spread requests to a rate-limited provider across every process, with the budget
in the database (one `PaceBudget` row per provider).

The row holds the next free send slot (the generic cell rate algorithm's theoretical arrival
time). Reserving n slots hands out n instants spaced 1/rate apart from the first free one and
moves the row past them, in one compare-and-set (retried when another process won the race),
so ticks on several machines never share a slot. Slots may lie in the future: the caller
waits for its slot. `hold_until` pushes the budget past a time the provider named
(`retry-after`, `ratelimit-reset`).
"""

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from dbqueue.models import PaceBudget

# Compare-and-set rounds before giving up: each lost round means another process took slots,
# so running out needs that many concurrent reservations in a row.
_ATTEMPTS = 50


class PaceContention(RuntimeError):
    """The budget row changed under every attempt to take slots from it."""


def reserve_slots(name: str, *, rate: float, count: int, now: datetime) -> list[datetime]:
    """Reserve `count` consecutive send slots of `name`'s budget at `rate` requests per
    second: the instants at which each request may go (the first is `now` when the budget is
    idle). Raises PaceContention if the row kept changing under every attempt."""
    interval = timedelta(seconds=1 / rate)
    for _ in range(_ATTEMPTS):
        current = _next_slot(name, now=now)
        first = max(current, now)
        taken = PaceBudget.objects.filter(name=name, next_slot_at=current).update(
            next_slot_at=first + interval * count, updated_at=now
        )
        if taken:
            return [first + interval * i for i in range(count)]
    raise PaceContention(f"could not reserve a send slot of {name!r}")


def next_slot(name: str) -> datetime | None:
    """The first free slot of `name`'s budget (None before its first use): one statement."""
    return PaceBudget.objects.filter(name=name).values_list("next_slot_at", flat=True).first()


def hold_until(name: str, *, until: datetime, now: datetime) -> None:
    """No slot of `name` before `until` (the provider asked us to wait): one statement."""
    PaceBudget.objects.filter(name=name, next_slot_at__lt=until).update(
        next_slot_at=until, updated_at=now
    )


def _next_slot(name: str, *, now: datetime) -> datetime:
    current = next_slot(name)
    if current is not None:
        return current
    try:
        with transaction.atomic():
            PaceBudget.objects.create(name=name, next_slot_at=now, updated_at=now)
    except IntegrityError:  # another process created it first
        pass
    return PaceBudget.objects.values_list("next_slot_at", flat=True).get(name=name)
