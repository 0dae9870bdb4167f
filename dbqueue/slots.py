"""Concurrency slots shared by every process: at most `capacity` pieces of work on one scope
(a webhook endpoint, say) at once, however many workers on however many machines run it.

Each scope has `capacity` rows in `ConcurrencySlot`. A holder takes as many free slots of
the scopes it has work for as that work needs, in one UPDATE … RETURNING for every scope,
for a lease; it renews them the same way while it uses them and frees those it no longer
needs. A slot whose lease lapsed is free again, so a holder that died (killed, frozen, cut
off) holds nothing for longer than its lease. On PostgreSQL the slots are picked with
`FOR UPDATE SKIP LOCKED`: holders taking slots at the same time never wait for each other
and never take the same slot; on SQLite the single writer lock gives the same guarantee.
"""

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from dbqueue.clock import micros
from dbqueue.models import ConcurrencySlot

# Each scope's slots ranked: those the holder (the parameter) holds first, then the lowest
# free ones.
_RANK = (
    "ROW_NUMBER() OVER (PARTITION BY scope ORDER BY CASE WHEN holder = %s THEN 0 ELSE 1 END, slot)"
)


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

    def take(self, wants: Mapping[str, int], *, now: datetime) -> None:
        """Hold `wants[scope]` slots of each scope (at most `capacity`, never fewer than it
        holds: those are renewed first, then the lowest free ones are added) until now + the
        lease, as far as free slots allow. One statement; two more when a scope this
        holder has not seen before comes back short, in case its slots do not exist yet."""
        wants = {
            scope: min(self.capacity, max(want, len(self.slots(scope))))
            for scope, want in wants.items()
        }
        wants = {scope: want for scope, want in wants.items() if want > 0}
        if not wants:
            return
        got = self._take(wants, now=now)
        short = {s for s, want in wants.items() if len(got.get(s, ())) < want} - self.created
        if short:
            _create(sorted(short), capacity=self.capacity)
            self.created |= short
            got.update(self._take({s: wants[s] for s in short}, now=now))
        for scope in wants:
            self.held.pop(scope, None)
            self.until.pop(scope, None)
        for scope, slots in got.items():
            self.held[scope] = slots
            self.until[scope] = now + self.lease

    def release(self, slots: Mapping[str, Iterable[int]]) -> None:
        """Free the given slots of each scope (those this holder holds): one statement, none
        when there is nothing to free."""
        pairs = sorted(
            (scope, slot)
            for scope, numbers in slots.items()
            for slot in set(numbers) & self.slots(scope)
        )
        if not pairs:
            return
        quote = connection.ops.quote_name
        table = quote(ConcurrencySlot._meta.db_table)
        if connection.vendor == "postgresql":
            # Two arrays: one statement shape whatever the count (prepared once), and each
            # pair looked up through the (scope, slot) index (LIMIT 1, its one row, keeps
            # the planner from hashing the whole table instead), then updated by its key.
            sql = (
                f"UPDATE {table} SET holder = '', held_until_us = 0 WHERE holder = %s AND "
                "id = ANY(ARRAY(SELECT slots.id FROM unnest(%s::text[], %s::smallint[]) "
                f"AS freed(scope, slot) CROSS JOIN LATERAL (SELECT id FROM {table} "
                "WHERE scope = freed.scope AND slot = freed.slot LIMIT 1) AS slots))"
            )
            params: list[Any] = [self.name, [s for s, _ in pairs], [n for _, n in pairs]]
        else:
            marks = " OR ".join(["(scope = %s AND slot = %s)"] * len(pairs))
            sql = (
                f"UPDATE {table} SET holder = '', held_until_us = 0 WHERE holder = %s AND ({marks})"
            )
            params = [self.name, *(value for pair in pairs for value in pair)]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        for scope, slot in pairs:
            left = self.held[scope] - {slot}
            if left:
                self.held[scope] = left
            else:
                del self.held[scope], self.until[scope]

    def release_all(self) -> None:
        self.release(dict(self.held))

    def slots(self, scope: str) -> frozenset[int]:
        return self.held.get(scope, frozenset())

    def expiring(self, *, now: datetime, within: timedelta) -> list[str]:
        """The scopes held whose lease ends within `within` of `now`."""
        return [scope for scope, until in self.until.items() if until - now < within]

    def _take(self, wants: Mapping[str, int], *, now: datetime) -> dict[str, frozenset[int]]:
        quote = connection.ops.quote_name
        table = quote(ConcurrencySlot._meta.db_table)
        ordered = sorted(wants)
        if connection.vendor == "postgresql":
            return self._take_pg(table, ordered, wants, now=now)
        marks = ", ".join(["%s"] * len(ordered))
        free = f"scope IN ({marks}) AND slot < %s AND (holder = %s OR held_until_us <= %s)"
        free_params: list[Any] = [*ordered, self.capacity, self.name, micros(now)]
        wanted = "CASE scope " + " ".join(["WHEN %s THEN %s"] * len(ordered)) + " END"
        wanted_params = [value for scope in ordered for value in (scope, wants[scope])]
        assign = [self.name, micros(now + self.lease)]
        sql = (
            f"UPDATE {table} SET holder = %s, held_until_us = %s WHERE id IN "
            f"(SELECT id FROM (SELECT id, scope, {_RANK} AS rank FROM {table} "
            f"WHERE {free}) ranked WHERE rank <= {wanted}) RETURNING scope, slot"
        )
        return _fetch_slots(sql, [*assign, self.name, *free_params, *wanted_params])

    def _take_pg(
        self, table: str, ordered: list[str], wants: Mapping[str, int], *, now: datetime
    ) -> dict[str, frozenset[int]]:
        # The scopes and their wants as two arrays: one statement shape whatever the count
        # (prepared once). Each scope's slots are looked up through the (scope, slot) index
        # and each taken slot updated by its key: with a list of values and a CASE over
        # them, the planner scanned the whole table twice, at every take.
        sql = (
            "WITH free AS MATERIALIZED (SELECT slots.id, slots.scope, slots.slot, "
            "slots.holder, wanted.want "
            "FROM unnest(%s::text[], %s::int[]) AS wanted(scope, want) CROSS JOIN LATERAL "
            f"(SELECT id, scope, slot, holder FROM {table} WHERE scope = wanted.scope "
            "AND slot < %s AND (holder = %s OR held_until_us <= %s) "
            "FOR UPDATE SKIP LOCKED) AS slots), "
            f"picked AS MATERIALIZED (SELECT id FROM (SELECT id, want, {_RANK} AS rank "
            "FROM free) ranked WHERE rank <= want) "
            f"UPDATE {table} AS taken SET holder = %s, held_until_us = %s "
            "WHERE taken.id = ANY(ARRAY(SELECT id FROM picked)) "
            "RETURNING taken.scope, taken.slot"
        )
        params: list[Any] = [ordered, [wants[scope] for scope in ordered], self.capacity]
        params += [self.name, micros(now), self.name, self.name, micros(now + self.lease)]
        return _fetch_slots(sql, params)


def _fetch_slots(sql: str, params: list[Any]) -> dict[str, frozenset[int]]:
    """Run a statement that returns (scope, slot) pairs; the slots of each scope."""
    got: dict[str, set[int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for scope, slot in cursor.fetchall():
            got.setdefault(scope, set()).add(slot)
    return {scope: frozenset(slots) for scope, slots in got.items()}


def slots_delete(scope: str) -> None:
    """Forget a scope's slots (its work is gone); a holder still holding one frees nothing
    when it lets go."""
    ConcurrencySlot.objects.filter(scope=scope).delete()


def _create(scopes: list[str], *, capacity: int) -> None:
    """Make sure each scope has its `capacity` slots (in one order for every holder, so two
    holders creating the same scopes cannot deadlock)."""
    ConcurrencySlot.objects.bulk_create(
        [ConcurrencySlot(scope=scope, slot=n) for scope in scopes for n in range(capacity)],
        ignore_conflicts=True,
    )
