"""What the connections scenario of bench/scale.py counts: the kinds of process, PgBouncer's
admin console, the sampler that keeps each set-up's peak connections, and their table."""

import argparse
import collections
import threading
import time
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row

from bench.scale_db import admin_connection

WEB, TICK, JOBS, JOBS_LISTEN = "gunicorn worker", "run_tick", "consume_jobs", "consume_jobs+LISTEN"
KINDS = (WEB, TICK, JOBS, JOBS_LISTEN)
COMMANDS = {TICK: "run_tick", JOBS: "consume_jobs", JOBS_LISTEN: "consume_jobs"}
BEHIND = ("behind pooler", "active behind pooler")
SAMPLE_SECONDS = 0.5
WORKER_START_SECONDS = 60.0
# Rows falling due per second of load, for the ticks to claim.
DUE_PER_SECOND = 20


def pooler_answers(url: str) -> bool:
    try:
        with pooler_console(url):
            return True
    except psycopg.Error:
        return False


def pooler_console(url: str) -> psycopg.Connection:
    admin = urlunsplit(urlsplit(url)._replace(path="/pgbouncer"))
    # The admin console speaks only the simple protocol: nothing may be prepared.
    return psycopg.connect(
        admin, autocommit=True, connect_timeout=3, row_factory=dict_row, prepare_threshold=None
    )


class SampledSetup(Protocol):
    """What a Sampler reads of a set-up (bench.scale_connections.Setup)."""

    pooled: bool
    args: argparse.Namespace

    def sample(self, admin: Any, console: Any) -> collections.Counter: ...


class Sampler:
    """A set-up's connections: read until every worker has connected, then sampled every
    SAMPLE_SECONDS in a thread while the load runs (`with`); keeps the peaks."""

    def __init__(self, setup: SampledSetup) -> None:
        self.setup = setup
        self.admin = admin_connection()
        self.console = pooler_console(setup.args.pooler_url) if setup.pooled else None
        self.peaks: dict[tuple[str, str], int] = collections.defaultdict(int)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def now(self) -> collections.Counter:
        return self.setup.sample(self.admin, self.console)

    def wait_for_workers(self, expected: dict[str, int]) -> None:
        """Workers connect at their first pass, after Python and Django have started: a
        loaded machine takes seconds for that."""
        column = "pooler clients" if self.setup.pooled else "direct"
        deadline = time.monotonic() + WORKER_START_SECONDS
        while time.monotonic() < deadline:
            counts = self.now()
            if all(counts[column, kind] >= count for kind, count in expected.items()):
                return
            time.sleep(SAMPLE_SECONDS)
        print(f"connections: not every worker had connected after {WORKER_START_SECONDS:g} s")

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            for key, count in self.now().items():
                self.peaks[key] = max(self.peaks[key], count)

    def close(self) -> None:
        self.admin.close()
        if self.console is not None:
            self.console.close()


def worker_counts(args: argparse.Namespace) -> dict[str, int]:
    return {TICK: args.ticks, JOBS: args.consumers, JOBS_LISTEN: args.consumers}


def print_peaks(peaks: dict[str, dict[tuple[str, str], int]], args: argparse.Namespace) -> None:
    counts = {WEB: args.web_workers * args.web_threads, **worker_counts(args)}
    direct = peaks.get("direct", {})
    pooled = peaks.get("PgBouncer", {})
    print(
        f"\nconnections: peaks over {args.load_seconds:g} s of load ({args.clients} API clients, "
        f"{DUE_PER_SECOND} rows due a second, a job per project created), sampled every "
        f"{SAMPLE_SECONDS:g} s; gunicorn {args.web_workers} workers x {args.web_threads} "
        "thread(s)"
    )
    print(
        f"{'process kind':<20} {'count':>5} {'server direct':>14} {'pooler clients':>15} "
        f"{'direct beside pooler':>21} {'behind pooler (active)':>23}"
    )
    for kind, count in counts.items():
        print(
            f"{kind:<20} {count:>5} {direct.get(('direct', kind), 0):>14} "
            f"{pooled.get(('pooler clients', kind), 0):>15} {pooled.get(('direct', kind), 0):>21}"
        )
    servers, active = (pooled.get((column, "all"), 0) for column in BEHIND)
    behind = f"{servers} ({active})"
    print(
        f"{'all':<20} {sum(counts.values()):>5} {direct.get(('direct', 'all'), 0):>14} "
        f"{pooled.get(('pooler clients', 'all'), 0):>15} {pooled.get(('direct', 'all'), 0):>21} "
        f"{behind:>23}"
    )
    print(
        "behind pooler: PgBouncer's server connections to PostgreSQL (SHOW SERVERS), shared "
        "by every kind; (active): at most this many held by a transaction at once"
    )
