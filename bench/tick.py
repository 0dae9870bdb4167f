"""Scheduler benchmark: run_tick against a fast local webhook sink.

    /work/venv/bin/python bench/tick.py [--db sqlite|postgres|both] [--rows N]
        [--concurrency C] [--rounds R] [--filler N] [--filler-due N]

For each database (a fresh SQLite file, or a PostgreSQL database tw_bench_tick, or the one
BENCH_TICK_DB names, that it creates and drops) it prints:
  1. deliveries/s of one tick over N due one-shot webhook rows, and the ratio to a bare loop
     posting the same requests through the same send_webhook, on connections kept alive as
     the tick keeps them, with the same concurrency and no database. It runs --rounds pairs,
     a bare loop then a tick back to back, and prints the best of each and each pair's ratio
     (a pair shares the machine's moment, so its ratio holds when a shared host slows both),
     and how long a fixed Python loop took before and after (the machine's speed). Then the
     CPU each kind of thread spent per delivered row in both (the main thread, the tick's
     database thread, the row workers that send, and the tick's sending process when it has
     one): where the tick's time beyond the bare loop's goes;
  2. SQL statements per delivered row, on every connection the tick uses (counted by an
     execute wrapper, in a tick of its own: the counting is not timed);
  3. tick time over --filler-due due rows with --filler parked and future rows in the table,
     divided by the same tick with none;
and then bench/recurrence.py's figure when that module is present. Prints; never judges.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tick_db  # noqa: E402

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def start_sink() -> tuple[subprocess.Popen, str]:
    sink = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "tick_sink.py")], stdout=subprocess.PIPE, text=True
    )
    port = sink.stdout.readline().strip()
    return sink, f"http://127.0.0.1:{port}/hook"


# Thread names (their prefix) by the kind of work they do, in the tick and in the bare loop.
THREAD_KINDS = {
    "MainThread": "main",
    "tick-database": "database",
    "tick-row": "row workers",
    "bare-row": "row workers",
}


class ThreadCpu:
    """The CPU time each kind of thread of this process spent meanwhile (THREAD_KINDS; the
    rest is "other"), read from Linux's per-thread run time (/proc/self/task/*/schedstat)
    every few milliseconds, so a thread that ends is counted up to its last reading; and
    the CPU of the child processes that ended meanwhile (the tick's sending process)."""

    INTERVAL = 0.005

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self._start: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="bench-cpu", daemon=True)

    @staticmethod
    def supported() -> bool:
        return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat")

    def __enter__(self) -> "ThreadCpu":
        self._children = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._start = self._read()
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._sampler.join()
        self._read()
        # The tick's sending process, ended (and waited for) with the tick.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = children.ru_utime + children.ru_stime
        spent -= self._children.ru_utime + self._children.ru_stime
        if spent:
            self.seconds["sending process"] += spent
        for tid, last in self._last.items():
            kind = self._kind.get(tid, "other")
            if kind != "bench":
                self.seconds[kind] += (last - self._start.get(tid, 0)) / 1e9

    def _sample(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            self._read()

    def _read(self) -> dict[int, int]:
        for thread in threading.enumerate():
            if thread.native_id is not None and thread.native_id not in self._kind:
                self._kind[thread.native_id] = _kind_of(thread.name)
        for entry in os.scandir("/proc/self/task"):
            try:
                with open(f"{entry.path}/schedstat") as stat:
                    self._last[int(entry.name)] = int(stat.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile: its last reading stands
        return dict(self._last)

    def per_row(self, rows: int) -> str:
        kinds = ["main", "database", "row workers", "other", "sending process"]
        return ", ".join(
            f"{kind} {self.seconds[kind] / rows * 1e6:.0f} us"
            for kind in kinds
            if kind in self.seconds
        )


def _kind_of(name: str) -> str:
    if name == "bench-cpu":
        return "bench"
    return next((kind for prefix, kind in THREAD_KINDS.items() if name.startswith(prefix)), "other")


def python_speed() -> float:
    """Seconds for 10**7 additions in a Python loop: how fast this machine is right now."""
    started = time.perf_counter()
    total = 0
    for i in range(10**7):
        total += i
    return time.perf_counter() - started


def bare_loop(*, url: str, secret: str, rows: int, concurrency: int) -> float:
    """Deliveries/s of the same signed POSTs with no database at all, on connections kept
    alive the way a tick keeps them."""
    from delivery.transports.base import WebhookMessage
    from delivery.transports.webhook import send_webhook
    from outbound.connections import Connections

    messages = [
        WebhookMessage(
            url=url,
            secrets=(secret,),
            msg_id=f"bench_{i}",
            payload={"type": "notification.fired", "data": {"subject": "Bench", "n": i}},
        )
        for i in range(rows)
    ]
    started = time.monotonic()
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="bare-row")
    with pool, Connections(per_origin=concurrency) as kept:
        results = list(pool.map(lambda m: send_webhook(m, timeout=10, connections=kept), messages))
    elapsed = time.monotonic() - started
    assert all(result.ok for result in results), "the sink refused a bare request"
    return rows / elapsed


class EveryStatement:
    """The SQL statements of every database connection in use meanwhile, the tick's own and
    those it opens (its claims run on a connection of their own on PostgreSQL), recorded by
    an execute wrapper on each (transaction control, which Django sends outside them, is
    not seen)."""

    def __init__(self) -> None:
        self.sql: list[str] = []
        self.connections: set[int] = set()

    def __call__(self, execute, sql, params, many, context):
        self.connections.add(id(context["connection"]))
        self.sql.append(sql)
        return execute(sql, params, many, context)

    def __enter__(self) -> "EveryStatement":
        from django.db import connection
        from django.db.backends.signals import connection_created

        connection.execute_wrappers.append(self)
        connection_created.connect(self._opened)
        return self

    def __exit__(self, *exc) -> None:
        from django.db import connection
        from django.db.backends.signals import connection_created

        connection_created.disconnect(self._opened)
        connection.execute_wrappers.remove(self)

    def _opened(self, sender, connection, **kwargs) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


def timed_tick(*, tenant, endpoint, rows: int, concurrency: int, count_statements=False, cpu=None):
    """Run one tick over `rows` fresh due rows; returns (summary, the statements it ran, or
    None when not asked to count them: counting costs the tick CPU). With `cpu` (a
    ThreadCpu), its threads' CPU is measured over the tick alone."""
    from contextlib import nullcontext

    from django.utils import timezone

    from delivery.scheduler.tick import run_tick

    tick_db.add_due_rows(
        tenant=tenant, endpoint=endpoint, count=rows, due_at=timezone.now() - timedelta(1)
    )
    counter = EveryStatement() if count_statements else nullcontext()
    with counter, cpu or nullcontext():
        summary = run_tick(max_rows=rows, time_budget=3600, concurrency=concurrency)
    assert summary.delivered == rows, summary.line()
    return summary, counter if count_statements else None


def cpu_by_thread(*, tenant, endpoint, url: str, args: argparse.Namespace) -> str | None:
    """The CPU per delivered row of each kind of thread, in one bare loop and one tick of
    their own (the sampling costs little, but not nothing); None where Linux's per-thread
    run time cannot be read."""
    if not ThreadCpu.supported():
        return None
    with ThreadCpu() as bare:
        bare_loop(url=url, secret=endpoint.secret, rows=args.rows, concurrency=args.concurrency)
    tick = ThreadCpu()
    timed_tick(
        tenant=tenant, endpoint=endpoint, rows=args.rows, concurrency=args.concurrency, cpu=tick
    )
    return f"tick: {tick.per_row(args.rows)}; bare loop: {bare.per_row(args.rows)}"


def run_one(args: argparse.Namespace) -> None:
    tick_db.prepare_environment(args.db)
    # Like for like with the bare loop: the one sink may take every delivery slot.
    os.environ["WEBHOOK_ENDPOINT_CONCURRENCY"] = str(args.concurrency)
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    from delivery.models import WebhookEndpoint
    from delivery.transports.signing import generate_secret
    from tenancy.models import Tenant

    call_command("migrate", verbosity=0)
    sink, url = start_sink()
    try:
        tenant = Tenant.objects.create(name="bench")
        endpoint = WebhookEndpoint.objects.create(tenant=tenant, url=url, secret=generate_secret())
        timed_tick(tenant=tenant, endpoint=endpoint, rows=50, concurrency=args.concurrency)

        # Alternate the two: the machine is shared and noisy.
        speed_before = python_speed()
        pairs = []
        for _ in range(args.rounds):
            bare = bare_loop(
                url=url, secret=endpoint.secret, rows=args.rows, concurrency=args.concurrency
            )
            summary, _ = timed_tick(
                tenant=tenant, endpoint=endpoint, rows=args.rows, concurrency=args.concurrency
            )
            pairs.append((bare, summary.delivered / summary.duration))
        speed_after = python_speed()
        bare_rate = max(bare for bare, _ in pairs)
        tick_rate = max(tick for _, tick in pairs)
        ratios = sorted(tick / bare for bare, tick in pairs)
        by_thread = cpu_by_thread(tenant=tenant, endpoint=endpoint, url=url, args=args)
        summary, statements = timed_tick(
            tenant=tenant,
            endpoint=endpoint,
            rows=args.rows,
            concurrency=args.concurrency,
            count_statements=True,
        )
        work = [sql for sql in statements.sql if not sql.upper().startswith(TRANSACTION_CONTROL)]
        print(
            f"[{args.db}] 1. tick: {tick_rate:.0f} deliveries/s over {args.rows} rows "
            f"(concurrency {args.concurrency}); bare loop: {bare_rate:.0f}/s; "
            f"ratio {tick_rate / bare_rate:.2f} (best of {args.rounds} each)"
        )
        print(
            f"[{args.db}] 1. each pair's ratio: {' '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f}; 10**7 additions in Python took "
            f"{speed_before:.2f}s before the pairs and {speed_after:.2f}s after"
        )
        if by_thread:
            print(f"[{args.db}] 1. CPU per delivered row by thread: {by_thread}")
        print(
            f"[{args.db}] 2. SQL statements per delivered row: "
            f"{len(work) / summary.delivered:.3f} ({len(work)} statements, savepoints left "
            f"out, over {len(statements.connections)} connection(s))"
        )

        def best_tick() -> float:
            runs = [
                timed_tick(
                    tenant=tenant,
                    endpoint=endpoint,
                    rows=args.filler_due,
                    concurrency=args.concurrency,
                )[0].duration
                for _ in range(2)
            ]
            return min(runs)

        empty = best_tick()
        started = time.monotonic()
        tick_db.add_filler(tenant=tenant, count=args.filler, now=timezone.now())
        filled_in = time.monotonic() - started
        full = best_tick()
        print(
            f"[{args.db}] 3. tick over {args.filler_due} due rows: {empty:.2f}s with no "
            f"filler, {full:.2f}s with {args.filler:,} parked/future rows "
            f"(inserted in {filled_in:.1f}s); ratio {full / empty:.2f}"
        )
    finally:
        sink.kill()
        sink.wait()
        tick_db.drop(args.db)


def recurrence_figure() -> None:
    try:
        from bench.recurrence import measure
    except ImportError:
        print("4. recurrence: bench/recurrence.py not present; skipped")
        return
    figures = measure()
    print(f"4. recurrence (minutely rule, 5 years old): {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5, help="bare-loop and tick pairs")
    parser.add_argument("--filler", type=int, default=1_000_000)
    parser.add_argument("--filler-due", type=int, default=1000)
    args = parser.parse_args()
    if args.db != "both":
        run_one(args)
        return
    # Django binds one database per process: each engine runs in its own child.
    for db in ("sqlite", "postgres"):
        sizes = ["--rows", args.rows, "--concurrency", args.concurrency, "--filler", args.filler]
        sizes += ["--rounds", args.rounds]
        sizes += ["--filler-due", args.filler_due]
        command = [sys.executable, __file__, "--db", db, *map(str, sizes)]
        subprocess.run(command, check=True)
    recurrence_figure()


if __name__ == "__main__":
    main()
