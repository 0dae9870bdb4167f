"""Pacing: spread requests to a rate-limited provider across every process, with the budget
in the database (one `PaceBudget` row per provider).

The row holds the next free send slot (the generic cell rate algorithm's theoretical arrival
time). Reserving n slots hands out n instants spaced 1/rate apart from the first free one
and moves the row past them in one UPDATE … RETURNING, so ticks on several machines never
share a slot and never retry. Slots may lie in the future: the caller waits for its slot.
`hold_until` pushes the budget past a time the provider named (`retry-after`,
`ratelimit-reset`).
"""

from datetime import datetime

from django.db import IntegrityError, connection, transaction

from dbqueue.clock import instant, micros
from dbqueue.models import PaceBudget


def reserve_slots(name: str, *, rate: float, count: int, now: datetime) -> list[datetime]:
    """Reserve `count` consecutive send slots of `name`'s budget at `rate` requests per
    second: the instants at which each request may go (the first is `now` when the budget
    is idle). One statement (two on the budget's first use)."""
    interval = round(1_000_000 / rate)
    after = _take(name, now_us=micros(now), interval=interval, count=count, now=now)
    if after is None:
        _create(name, now=now)
        after = _take(name, now_us=micros(now), interval=interval, count=count, now=now)
        assert after is not None  # the row _create made (or a concurrent first use did)
    first = after - interval * count
    return [instant(first + interval * i) for i in range(count)]


def take_slot(name: str, *, rate: float, now: datetime) -> datetime | None:
    """Take the send slot of `name`'s budget at `rate` per second if one is free at `now`
    (None: go now), else take nothing and return when the next one is free: the caller
    defers its request to then. Unlike `reserve_slots`, a caller that has to wait never
    holds a slot it may not use. One statement while slots are free, two otherwise (three
    on the budget's first use)."""
    interval = round(1_000_000 / rate)
    now_us = micros(now)
    if _take_if_free(name, now_us=now_us, interval=interval, now=now):
        return None
    upcoming = next_slot(name)
    if upcoming is None:
        _create(name, now=now)
        return take_slot(name, rate=rate, now=now)
    # Freed meanwhile (another process's slot passed): the caller asks again then.
    return max(upcoming, now)


def reserve_slot_by(name: str, *, rate: float, now: datetime, latest: datetime) -> datetime | None:
    """Reserve the next free send slot of `name`'s budget at `rate` per second if it comes
    no later than `latest` (the caller waits for it), else take nothing and return None:
    other processes hold every slot until then. One statement (three on the budget's first
    use)."""
    interval = round(1_000_000 / rate)
    after = _take_by(name, now_us=micros(now), interval=interval, latest_us=micros(latest), now=now)
    if after is None and next_slot(name) is None:
        _create(name, now=now)
        return reserve_slot_by(name, rate=rate, now=now, latest=latest)
    return None if after is None else instant(after - interval)


def _take_by(name: str, *, now_us: int, interval: int, latest_us: int, now: datetime) -> int | None:
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    table = connection.ops.quote_name(PaceBudget._meta.db_table)
    stamp = PaceBudget._meta.get_field("updated_at").get_db_prep_save(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            # Only the quoted table name and a function name are formatted in; values bind.
            f"UPDATE {table} SET next_slot_us = {greatest}(next_slot_us, %s) + %s, "  # noqa: S608
            "updated_at = %s WHERE name = %s AND next_slot_us <= %s RETURNING next_slot_us",
            [now_us, interval, stamp, name, latest_us],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def _take_if_free(name: str, *, now_us: int, interval: int, now: datetime) -> bool:
    return _take_by(name, now_us=now_us, interval=interval, latest_us=now_us, now=now) is not None


def next_slot(name: str) -> datetime | None:
    """The first free slot of `name`'s budget (None before its first use): one statement."""
    next_us = PaceBudget.objects.filter(name=name).values_list("next_slot_us", flat=True).first()
    return None if next_us is None else instant(next_us)


def hold_until(name: str, *, until: datetime, now: datetime) -> None:
    """No slot of `name` before `until` (the provider asked us to wait): one statement."""
    PaceBudget.objects.filter(name=name, next_slot_us__lt=micros(until)).update(
        next_slot_us=micros(until), updated_at=now
    )


def _take(name: str, *, now_us: int, interval: int, count: int, now: datetime) -> int | None:
    """Move the budget past `count` slots from max(next free slot, now); the new next free
    slot, or None when the budget has no row yet."""
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    table = connection.ops.quote_name(PaceBudget._meta.db_table)
    stamp = PaceBudget._meta.get_field("updated_at").get_db_prep_save(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            # Only the quoted table name and a function name are formatted in; values bind.
            f"UPDATE {table} SET next_slot_us = {greatest}(next_slot_us, %s) + %s, "  # noqa: S608
            "updated_at = %s WHERE name = %s RETURNING next_slot_us",
            [now_us, interval * count, stamp, name],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def _create(name: str, *, now: datetime) -> None:
    try:
        with transaction.atomic():
            PaceBudget.objects.create(name=name, next_slot_us=micros(now), updated_at=now)
    except IntegrityError:  # another process created it first
        pass
