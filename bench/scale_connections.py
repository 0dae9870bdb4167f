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
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench.api import LISTS, seed_lists
from bench.harness import PYTHON, ROOT, drive, free_port, manage, start_gunicorn
from bench.load_tick import _endpoint, _rows, start_recording_sink
from bench.scale_db import BENCH_APPLICATION
from bench.scale_peaks import (
    BEHIND,
    COMMANDS,
    DUE_PER_SECOND,
    JOBS_LISTEN,
    KINDS,
    WEB,
    Sampler,
    pooler_answers,
    print_peaks,
    worker_counts,
)


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


def work_done() -> tuple[int, int]:
    """(successful deliveries, jobs completed) so far."""
    from delivery.models import Delivery, DeliveryOutcome
    from jobs.models import Job, JobStatus

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
