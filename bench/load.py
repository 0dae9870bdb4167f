"""Load benchmarks of the queues under multi-tenant load. Prints figures; never judges.

    .venv/bin/python bench/load.py --scenario claims|burst|dead_endpoint|soak|email_burst|
        costly_rules
        [--db sqlite|postgres|both] [--claims N] [--filler N] [--rounds N] [--minutes M]

Each scenario is a function in SCENARIOS, run once per database in its own process (Django
binds one database per process) against a fresh database: a SQLite file in the temporary
directory, or the PostgreSQL database named by DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/bench_fair), which is DROPPED and re-created.

claims: the median time of one claim batch (16 rows, rolled back so every claim sees the
same table) of the scheduler's fair claim, over 10,000 due rows of one tenant and over
10,000 due rows spread across 1,000 tenants, each without and with --filler parked/future
rows in the table; the ratios are 1,000 tenants / 1 tenant and filled / not filled. The
table without and the table with the filler are two databases, each served by its own
worker process, so the four figures are taken alternately, seconds apart, for --rounds
rounds; each figure is its best round's median: the machine is shared and noisy, and a
figure taken minutes after the one it is compared with measures the machine's drift.

burst, dead_endpoint, soak and email_burst run real ticks against real local HTTP servers
(email_burst against the fake Resend of tests/support at 2 requests/s) with default
settings; see bench/load_tick.py for what each prints. costly_rules: see
bench/load_recurrence.py.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import load_recurrence, load_tick, tick_db  # noqa: E402

PG_DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_fair"
SQLITE_PATH = Path(tempfile.gettempdir()) / "tw_bench_load.sqlite3"
DUE_ROWS = 10_000
TENANTS = 1_000
BATCH = 16


def _pg_url() -> str:
    return os.environ.get("DATABASE_URL", PG_DEFAULT_URL)


def _with_suffix(url: str, suffix: str) -> str:
    """The same server, the database name with `suffix` appended."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path + suffix))


def _pg_admin(url: str) -> tuple[str, str]:
    """(URL of the server's `postgres` database, name of the bench database)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql", path="/postgres")), parts.path[1:]


def _sqlite_path() -> Path:
    return Path(os.environ.get("BENCH_LOAD_SQLITE", SQLITE_PATH))


def _sqlite_files() -> list[Path]:
    return [Path(f"{_sqlite_path()}{suffix}") for suffix in ("", "-wal", "-shm")]


def prepare_environment(db: str) -> None:
    """Point Django at a fresh bench database (call before django.setup())."""
    if db == "postgres":
        import psycopg

        url = _pg_url()
        admin_url, name = _pg_admin(url)
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = url
    else:
        for path in _sqlite_files():
            path.unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{_sqlite_path()}"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # The scenarios' receivers listen on 127.0.0.1.
    os.environ["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"


def drop(db: str) -> None:
    from django.db import connection

    connection.close()
    if db == "postgres":
        import psycopg

        admin_url, name = _pg_admin(_pg_url())
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        for path in _sqlite_files():
            path.unlink(missing_ok=True)


def add_due(*, tenants: list, count: int, now: datetime) -> None:
    """`count` due rows dealt round the tenants, one second apart, oldest first."""
    from django.db import connection

    from delivery.models import Notification

    Notification.objects.bulk_create(
        [
            Notification(
                tenant=tenants[i % len(tenants)],
                channels=["webhook"],
                subject="Bench",
                body="Bench body",
                next_fire_at=now - timedelta(seconds=count - i),
                recurrence_anchor=now,
            )
            for i in range(count)
        ],
        batch_size=1000,
    )
    # Vacuum too: the rows a previous shape deleted would otherwise sit in the due index's
    # range, and every claim would visit them.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def median_claim_ms(*, now: datetime, claims: int) -> float:
    """Median milliseconds of one claim batch; each is rolled back, so all see one table."""
    from django.db import transaction

    from delivery.scheduler.tick import notification_claim

    timings = []
    for _ in range(claims):
        with transaction.atomic():
            started = time.perf_counter()
            claimed = notification_claim(now=now, lease=timedelta(seconds=45), limit=BATCH)
            timings.append(time.perf_counter() - started)
            assert len(claimed) == BATCH, len(claimed)
            transaction.set_rollback(True)
    return statistics.median(timings) * 1000


SHAPES = {"1 tenant": 1, f"{TENANTS:,} tenants": TENANTS}
TABLES = {"without": 0, "with": None}  # None: --filler rows


class _ClaimWorker:
    """A process with its own bench database (suffix `_<table>`) that times claims on
    request: one line in (a shape), one line out (the best median in ms)."""

    def __init__(self, db: str, table: str, args: argparse.Namespace) -> None:
        filler = args.filler if TABLES[table] is None else TABLES[table]
        env = {**os.environ, "DATABASE_URL": _with_suffix(_pg_url(), f"_{table}")}
        env["BENCH_LOAD_SQLITE"] = f"{_sqlite_path()}.{table}"
        command = [sys.executable, __file__, "--claims-worker", "--db", db]
        command += ["--filler", str(filler), "--claims", str(args.claims)]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._read()  # "ready": its table is built

    def _read(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"claims worker exited with {self.process.wait()}")
        return line.strip()

    def median_ms(self, shape: str) -> float:
        self.process.stdin.write(shape + "\n")
        self.process.stdin.flush()
        return float(self._read())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=120)


def claims_worker(db: str, args: argparse.Namespace) -> None:
    """The worker side of _ClaimWorker: its tenants and filler once, then per request the
    due rows of that shape (unless already there) and the median of --claims claims."""
    from django.utils import timezone

    from delivery.models import Notification
    from tenancy.models import Tenant

    now = timezone.now()
    tenants = Tenant.objects.bulk_create([Tenant(name=f"t{i}") for i in range(TENANTS)])
    if args.filler:
        tick_db.add_filler(tenant=Tenant.objects.create(name="filler"), count=args.filler, now=now)
    print("ready", flush=True)
    current = None
    for line in sys.stdin:
        shape = line.strip()
        if shape != current:
            Notification.objects.filter(subject="Bench").delete()
            add_due(tenants=tenants[: SHAPES[shape]], count=DUE_ROWS, now=now)
            median_claim_ms(now=now, claims=5)  # warm the caches and the plan
            current = shape
        print(f"{median_claim_ms(now=now, claims=args.claims):.4f}", flush=True)


def scenario_claims(db: str, args: argparse.Namespace) -> None:
    workers = {table: _ClaimWorker(db, table, args) for table in TABLES}
    best = {(table, shape): float("inf") for table in TABLES for shape in SHAPES}
    try:
        for _ in range(args.rounds):
            for shape in SHAPES:
                for table, worker in workers.items():
                    best[table, shape] = min(best[table, shape], worker.median_ms(shape))
    finally:
        for worker in workers.values():
            worker.close()
    one, many = SHAPES
    for table, label in (("without", " no filler"), ("with", f" {args.filler:,} filler")):
        print(
            f"[{db}] claims,{label}: {DUE_ROWS:,} due rows of {one}: {best[table, one]:.2f} ms; "
            f"over {many}: {best[table, many]:.2f} ms; "
            f"ratio {best[table, many] / best[table, one]:.2f} "
            f"(best of {args.rounds} medians of {args.claims} batches of {BATCH})"
        )
    for shape in SHAPES:
        print(
            f"[{db}] claims, {DUE_ROWS:,} due rows of {shape}: with {args.filler:,} "
            f"parked/future rows {best['with', shape]:.2f} ms, without "
            f"{best['without', shape]:.2f} ms; "
            f"ratio {best['with', shape] / best['without', shape]:.2f}"
        )


SCENARIOS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "claims": scenario_claims,
    "burst": lambda db, args: load_tick.burst(db, two_writes=args.two_writes),
    "dead_endpoint": lambda db, args: load_tick.dead_endpoint(db),
    "soak": lambda db, args: load_tick.soak(db, minutes=args.minutes),
    "email_burst": lambda db, args: load_tick.email_burst(db, sizes=tuple(args.sizes)),
    "costly_rules": lambda db, args: load_recurrence.costly_rules(db),
}


def run_one(db: str, args: argparse.Namespace) -> None:
    prepare_environment(db)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        if args.claims_worker:
            claims_worker(db, args)
        else:
            SCENARIOS[args.scenario](db, args)
    finally:
        drop(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--claims-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--claims", type=int, default=200, help="claim batches per figure")
    parser.add_argument("--filler", type=int, default=1_000_000, help="parked/future rows")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the shapes")
    parser.add_argument("--minutes", type=float, default=3.0, help="soak: how long")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[300, 10_000], help="email_burst: rows"
    )
    parser.add_argument(
        "--two-writes",
        action="store_true",
        help="burst: a receiver that writes its headers and body apart, Nagle on",
    )
    args = parser.parse_args()
    if args.scenario is None and not args.claims_worker:
        parser.error("the following arguments are required: --scenario")
    if args.db != "both":
        run_one(args.db, args)
        return
    for db in ("sqlite", "postgres"):
        options = ["--claims", args.claims, "--filler", args.filler, "--rounds", args.rounds]
        options += ["--minutes", args.minutes, "--sizes", *args.sizes]
        options += ["--two-writes"] if args.two_writes else []
        command = [
            sys.executable,
            __file__,
            "--scenario",
            args.scenario,
            "--db",
            db,
            *map(str, options),
        ]
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
