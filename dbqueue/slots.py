"""Concurrency slots shared by every process: at most `capacity` pieces of work on one scope
(a webhook endpoint, say) at once, however many workers on however many machines run it.

Each scope has `capacity` rows in `ConcurrencySlot`. A holder takes every free slot of the
scopes it has work for in one UPDATE … RETURNING, for a lease; it renews them the same way
while it uses them and frees them when it has no more work for the scope. A slot whose lease
lapsed is free again, so a holder that died (killed, frozen, cut off) holds nothing for
longer than its lease. On PostgreSQL the slots are picked with `FOR UPDATE SKIP LOCKED`:
holders taking slots at the same time never wait for each other and never take the same
slot; on SQLite the single writer lock gives the same guarantee.
"""

import uuid
from collections.abc import Collection, Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection

from dbqueue.models import ConcurrencySlot

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SlotHolder:
    """The slots one worker holds (one tick), by scope; what it holds and until when is
    what the database said when it last took or renewed them."""

    def __init__(self, *, capacity: int, lease: timedelta) -> None:
        self.name = uuid.uuid4().hex
        self.capacity, self.lease = capacity, lease
        self.held: dict[str, frozenset[int]] = {}
        self.until: dict[str, datetime] = {}
        # Scopes whose rows this holder has made sure exist (at most once each).
        self.created: set[str] = set()

    def take(self, scopes: Collection[str], *, now: datetime) -> None:
        """Hold every free slot of `scopes` (renewing those already held) until now + the
        lease. One statement; two more when a scope this holder has not seen before comes
        back short, in case its slots do not exist yet."""
        if not scopes:
            return
        got = self._take(scopes, now=now)
        short = {s for s in scopes if len(got.get(s, ())) < self.capacity} - self.created
        if short:
            _create(sorted(short), capacity=self.capacity)
            self.created |= short
            got.update(self._take(short, now=now))
        for scope in scopes:
            self.held.pop(scope, None)
            self.until.pop(scope, None)
        for scope, slots in got.items():
            self.held[scope] = slots
            self.until[scope] = now + self.lease

    def release(self, scopes: Iterable[str]) -> None:
        """Free every slot held of `scopes`: one statement (none when nothing is held)."""
        held = sorted(scope for scope in set(scopes) if scope in self.held)
        if not held:
            return
        quote = connection.ops.quote_name
        table = quote(ConcurrencySlot._meta.db_table)
        marks = ", ".join(["%s"] * len(held))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET holder = '', held_until_us = 0 "
                f"WHERE holder = %s AND scope IN ({marks})",
                [self.name, *held],
            )
        for scope in held:
            del self.held[scope], self.until[scope]

    def release_all(self) -> None:
        self.release(list(self.held))

    def slots(self, scope: str) -> frozenset[int]:
        return self.held.get(scope, frozenset())

    def expiring(self, *, now: datetime, within: timedelta) -> list[str]:
        """The scopes held whose lease ends within `within` of `now`."""
        return [scope for scope, until in self.until.items() if until - now < within]

    def _take(self, scopes: Collection[str], *, now: datetime) -> dict[str, frozenset[int]]:
        quote = connection.ops.quote_name
        table = quote(ConcurrencySlot._meta.db_table)
        ordered = sorted(scopes)
        marks = ", ".join(["%s"] * len(ordered))
        free = f"scope IN ({marks}) AND slot < %s AND (holder = %s OR held_until_us <= %s)"
        params = [*ordered, self.capacity, self.name, _micros(now)]
        assign = [self.name, _micros(now + self.lease)]
        if connection.vendor == "postgresql":
            sql = (
                f"WITH free AS (SELECT id FROM {table} WHERE {free} FOR UPDATE SKIP LOCKED) "
                f"UPDATE {table} AS taken SET holder = %s, held_until_us = %s FROM free "
                "WHERE taken.id = free.id RETURNING taken.scope, taken.slot"
            )
            params = [*params, *assign]
        else:
            sql = (
                f"UPDATE {table} SET holder = %s, held_until_us = %s WHERE {free} "
                "RETURNING scope, slot"
            )
            params = [*assign, *params]
        got: dict[str, set[int]] = {}
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            for scope, slot in cursor.fetchall():
                got.setdefault(scope, set()).add(slot)
        return {scope: frozenset(slots) for scope, slots in got.items()}


def _create(scopes: list[str], *, capacity: int) -> None:
    """Make sure each scope has its `capacity` slots (in one order for every holder, so two
    holders creating the same scopes cannot deadlock)."""
    ConcurrencySlot.objects.bulk_create(
        [ConcurrencySlot(scope=scope, slot=n) for scope in scopes for n in range(capacity)],
        ignore_conflicts=True,
    )


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)
