"""The connections scenario of bench/scale.py: server connections per kind of process,
straight to PostgreSQL and through a transaction-mode PgBouncer.

The processes: gunicorn with W workers (of T threads), K `run_tick --loop --interval 1`, J
`consume_jobs --loop --interval 1` that poll and J more with DATABASE_LISTEN_URL (straight
to PostgreSQL in both set-ups: LISTEN needs a session of its own). Each kind connects under
an application_name of its own. While C clients read pages and create projects (each
create queues a provisioning job) and rows fall due for the ticks, the connections are
sampled every half second; the figures are the peaks. Straight: pg_stat_activity by
application_name. Through PgBouncer: its client connections by application_name (SHOW
CLIENTS), its server connections to PostgreSQL (SHOW SERVERS: shared by every kind, so
counted for all of them together), and the LISTEN sessions, straight, from
pg_stat_activity.
"""

import argparse
import collections
import json
import random
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row

from bench.api import (
    LISTS,
    PYTHON,
    ROOT,
    drive,
    free_port,
    manage,
    seed_lists,
    start_gunicorn,
)
from bench.load_tick import _endpoint, _rows, start_recording_sink
from bench.scale_db import BENCH_APPLICATION, admin_connection

WEB, TICK, JOBS, JOBS_LISTEN = "gunicorn worker", "run_tick", "consume_jobs", "consume_jobs+LISTEN"
KINDS = (WEB, TICK, JOBS, JOBS_LISTEN)
COMMANDS = {TICK: "run_tick", JOBS: "consume_jobs", JOBS_LISTEN: "consume_jobs"}
BEHIND = ("behind pooler", "active behind pooler")
SAMPLE_SECONDS = 0.5
WORKER_START_SECONDS = 60.0
# Rows falling due per second of load, for the ticks to claim.
DUE_PER_SECOND = 20


def run(env: dict[str, str], args: argparse.Namespace) -> None:
    from tenancy.models import Tenant

    grant = json.loads(manage(env, "create_tenant", "Scale", "--owner", "s@x.io", "--json"))
    token = grant["token"]
    log = Path(tempfile.gettempdir()) / "tw_bench_scale_connections.log"
    sink, url = start_recording_sink(log)
    endpoint = _endpoint(Tenant.objects.get(), url)
    database = env["DATABASE_URL"].rsplit("/", 1)[1]
    direct = env["DATABASE_URL"]
    pooled = urlunsplit(urlsplit(args.pooler_url)._replace(path=f"/{database}"))
    setups = {"direct": direct, "PgBouncer": pooled}
    peaks, work = {}, {}
    try:
        for setup, url in setups.items():
            if setup == "PgBouncer" and not pooler_answers(args.pooler_url):
                print(
                    f"connections: no PgBouncer answers at {args.pooler_url} (`.ci/pgbouncer.sh`,"
                    " as root, starts one): the pooled half is skipped"
                )
                continue
            run_setup = Setup(env, url, direct=direct, pooled=setup == "PgBouncer", args=args)
            peaks[setup], work[setup] = run_setup.measure(token, endpoint, seed=not peaks)
    finally:
        sink.kill()
        sink.wait()
    print_peaks(peaks, args)
    for setup, line in work.items():
        print(f"{setup}: {line}")


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


class Setup:
    """The processes of one set-up (straight or pooled), their load and their sampling."""

    def __init__(
        self, env: dict[str, str], url: str, *, direct: str, pooled: bool, args: argparse.Namespace
    ) -> None:
        self.env, self.url, self.direct, self.pooled, self.args = env, url, direct, pooled, args
        self.database = env["DATABASE_URL"].rsplit("/", 1)[1]
        self.applications = {kind: f"tw-scale-{n}" for n, kind in enumerate(KINDS)}

    def kind_env(self, kind: str) -> dict[str, str]:
        env = {**self.env, "DATABASE_URL": self.connect_url(self.url, kind)}
        if self.pooled:
            # Debian's PgBouncer 1.18 cannot follow prepared statements.
            env["DATABASE_PREPARED_STATEMENTS"] = "false"
        if kind == JOBS_LISTEN:
            env["DATABASE_LISTEN_URL"] = self.connect_url(self.direct, kind)
        return env

    def connect_url(self, url: str, kind: str) -> str:
        return f"{url}?application_name={self.applications[kind]}"

    def start(self, port: int) -> list[subprocess.Popen]:
        args = self.args
        web = start_gunicorn(
            self.kind_env(WEB), port, workers=args.web_workers, threads=args.web_threads
        )
        return [web] + [
            subprocess.Popen(
                [PYTHON, "manage.py", COMMANDS[kind], "--loop", "--interval", "1"],
                cwd=ROOT,
                env=self.kind_env(kind),
                stdout=subprocess.DEVNULL,
            )
            for kind, count in worker_counts(args).items()
            for _ in range(count)
        ]

    def measure(self, token: str, endpoint, *, seed: bool) -> tuple[dict, str]:
        """Peak connections by (column, kind) under load, and a line on the work done."""
        fall_due(endpoint, seconds=self.args.load_seconds)
        before = work_done()
        port = free_port()
        processes = self.start(port)
        sampler = Sampler(self)
        try:
            base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
            if seed:
                seed_lists(base, auth)
            sampler.wait_for_workers(worker_counts(self.args))
            with sampler:
                load = drive(
                    api_load(base, auth), clients=self.args.clients,
                    seconds=self.args.load_seconds, cpu=dict,
                )  # fmt: skip
        finally:
            sampler.close()
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=120)
        rows, jobs = (after - was for after, was in zip(work_done(), before, strict=True))
        return sampler.peaks, (
            f"{load['requests']:,.0f} API requests ({load['errors']:.0f} failed), {rows} "
            f"deliveries (the due rows and what the jobs sent), {jobs} jobs completed"
        )

    def sample(
        self, admin: psycopg.Connection, console: psycopg.Connection | None
    ) -> collections.Counter:
        """Connections now, by (column, kind), each column's total under the kind "all"."""
        counts: collections.Counter = collections.Counter()
        kinds = {application: kind for kind, application in self.applications.items()}
        behind: set[int] = set()
        if console is not None:
            servers = self.pooler_rows(console, "SHOW SERVERS")
            behind = {row["local_port"] for row in servers}
            counts[BEHIND[0], "all"] = len(servers)
            counts[BEHIND[1], "all"] = sum(row["state"] == "active" for row in servers)
            for row in self.pooler_rows(console, "SHOW CLIENTS"):
                if row["application_name"] in kinds:
                    counts["pooler clients", kinds[row["application_name"]]] += 1
                    counts["pooler clients", "all"] += 1
        rows = admin.execute(
            "SELECT application_name, client_port FROM pg_stat_activity"
            " WHERE datname = %s AND application_name <> %s",
            [self.database, BENCH_APPLICATION],
        ).fetchall()
        for application, port in rows:
            # A server connection of the pooler carries the name of the client that last
            # used it: it is counted behind the pooler, not as that kind's.
            if port not in behind and application in kinds:
                counts["direct", kinds[application]] += 1
                counts["direct", "all"] += 1
        return counts

    def pooler_rows(self, console: psycopg.Connection, command: str) -> list[dict]:
        return [row for row in console.execute(command) if row["database"] == self.database]


class Sampler:
    """A set-up's connections: read until every worker has connected, then sampled every
    SAMPLE_SECONDS in a thread while the load runs (`with`); keeps the peaks."""

    def __init__(self, setup: Setup) -> None:
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


def work_done() -> tuple[int, int]:
    """(successful deliveries, jobs completed) so far."""
    from jobs.models import Job, JobStatus
    from notifications.models import Delivery, DeliveryOutcome

    return (
        Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED).count(),
        Job.objects.filter(status=JobStatus.COMPLETED).count(),
    )


def fall_due(endpoint, *, seconds: float) -> None:
    """DUE_PER_SECOND webhook rows falling due each second from now for `seconds`."""
    from django.utils import timezone

    now = timezone.now()
    for second in range(int(seconds) + 1):
        due = now + timedelta(seconds=second)
        _rows(tenant=endpoint.tenant, endpoint=endpoint, count=DUE_PER_SECOND, due_at=due)


def api_load(base: str, auth: dict[str, str]):
    """One request of the API load: a page of either list, or a project created (which
    queues its provisioning job)."""

    def create(session) -> bool:
        headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
        return session.post(f"{base}/v1/projects", json={"name": "load"}, headers=headers).ok

    reads = [
        lambda session, path=path: session.get(f"{base}{path}", headers=auth).ok
        for path in LISTS.values()
    ]
    calls = [*reads, create]
    return lambda session: random.choice(calls)(session)


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
