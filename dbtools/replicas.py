"""Read replicas (PostgreSQL streaming replication) and the log positions that say how fresh
each database is.

`ReplicaRouter` sends reads where the request's routing state (a contextvar set by
`dbtools.bookmarks.BookmarkMiddleware` for API reads) says, and everything else — every
write, every worker, every command, every read inside a transaction — to the primary.
Which replica may serve a read is decided from a health probe of one statement per replica,
cached briefly per process: a replica that is down, promoted, or behind by more than
REPLICA_MAX_LAG_SECONDS is skipped until a later probe finds it well again.
"""

import contextlib
import random
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

REPLICA_ALIAS_PREFIX = "replica_"
# How long a probe's verdict stands: a healthy replica is probed again after a second, one
# that failed after five (a replica that refuses connections must not cost every request).
HEALTHY_FOR_SECONDS = 1.0
DOWN_FOR_SECONDS = 5.0

_LSN = re.compile(r"\A([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})\Z")


@dataclass(frozen=True, order=True)
class Lsn:
    """A WAL position, PostgreSQL's `pg_lsn`: two 32-bit hexadecimal halves, `16/B374D848`."""

    value: int

    @classmethod
    def parse(cls, text: str) -> "Lsn":
        match = _LSN.match(text)
        if match is None:
            raise ValueError(f"not a log position: {text!r}")
        return cls((int(match[1], 16) << 32) | int(match[2], 16))

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"


ZERO = Lsn(0)


@dataclass
class Routing:
    """Where this request's reads go, and the position they are known to be at least as
    fresh as (the answer's bookmark)."""

    read_alias: str
    fresh_as: Lsn


routing: ContextVar[Routing | None] = ContextVar("tickwork_routing", default=None)


class ReplicaRouter:
    """Django database router: reads follow the request's routing, the rest the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        current = routing.get()
        if current is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        return current.read_alias

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


@dataclass(frozen=True)
class _Probe:
    at: float
    usable: bool
    replayed: Lsn

    def current(self) -> bool:
        stands_for = HEALTHY_FOR_SECONDS if self.usable else DOWN_FOR_SECONDS
        return time.monotonic() - self.at < stands_for


# Replayed up to where, and how far behind: an idle primary sends nothing to replay, so a
# replica that has replayed all it received counts as not behind at all.
_REPLICA_STATUS = """
    SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,
           CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)
           END
"""
_probes: dict[str, _Probe] = {}
_primary: dict[str, tuple[float, Lsn]] = {}


def replica_aliases() -> list[str]:
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_ALIAS_PREFIX)]


def mark_down(alias: str) -> None:
    """A replica failed mid-request: skip it until it is probed again."""
    _probes[alias] = _Probe(time.monotonic(), usable=False, replayed=ZERO)
    _close_quietly(alias)


def probe(alias: str, *, fresh: bool = False) -> _Probe:
    cached = _probes.get(alias)
    if cached is not None and cached.current() and not fresh:
        return cached
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(_REPLICA_STATUS)
            in_recovery, replayed, lag_seconds = cursor.fetchone()
    except DatabaseError:
        mark_down(alias)
        return _probes[alias]
    usable = bool(in_recovery) and replayed is not None
    usable = usable and float(lag_seconds) <= settings.REPLICA_MAX_LAG_SECONDS
    _probes[alias] = result = _Probe(
        time.monotonic(), usable=usable, replayed=Lsn.parse(replayed) if usable else ZERO
    )
    return result


def primary_position(*, fresh: bool) -> Lsn:
    """The primary's `pg_current_wal_lsn()`: queried now when `fresh` (after a write), else
    at most a second old (every read on the primary is at least that fresh). SQLite: 0/0."""
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return ZERO
    cached = _primary.get(DEFAULT_DB_ALIAS)
    if cached is not None and not fresh and time.monotonic() - cached[0] < HEALTHY_FOR_SECONDS:
        return cached[1]
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        position = Lsn.parse(cursor.fetchone()[0])
    _primary[DEFAULT_DB_ALIAS] = (time.monotonic(), position)
    return position


def route_read(bookmark: Lsn | None, *, primary_only: bool) -> Routing:
    """A replica that has replayed `bookmark` (any healthy one without a bookmark), else
    the primary."""
    floor = bookmark or ZERO
    candidates = [] if primary_only else replica_aliases()
    for alias in random.sample(candidates, len(candidates)):
        status = probe(alias)
        if status.usable and status.replayed < floor:
            status = probe(alias, fresh=True)  # it has probably caught up since
        if status.usable and status.replayed >= floor:
            return Routing(alias, max(status.replayed, floor))
    return on_primary(bookmark)


def on_primary(bookmark: Lsn | None) -> Routing:
    return Routing(DEFAULT_DB_ALIAS, max(primary_position(fresh=False), bookmark or ZERO))


def _close_quietly(alias: str) -> None:
    with contextlib.suppress(DatabaseError):
        connections[alias].close()
