"""The ticks scenario of bench/scale.py: one burst drained by 1, 2 and 4 tick processes.

Every burst starts from emptied notification and delivery tables: T tenants, each with its
own webhook endpoint on one receiver process (bench/tick_sink.py, recording each request's
webhook-id), R due one-shot rows each. N `manage.py run_tick --loop --interval 1` processes
start at once with the product's default settings; the burst is drained when every row is
completed, and the wall time runs from their start (Python and Django start-up included)
to then. CPU seconds in that window are read from /proc: the database's backends and the
server's background processes, the receiver, the tick processes, and the whole machine
(/proc/stat).

A tick that finds nothing to claim ends and its process waits the interval; a tick that
ends (due_left=0) while rows are still due and unclaimed is counted, with how many, when it
ends: another process's tick holds the rows' endpoint slots or lost the race for them.
"""

import argparse
import collections
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import PYTHON, ROOT, children_of, cpu_seconds
from bench.load_tick import _endpoint, _rows, arrivals, start_recording_sink
from bench.scale_db import admin_connection, server_processes
from bench.scale_report import Burst, print_bursts

TICK_INTERVAL = "1"
POLL_SECONDS = 0.25
DRAIN_TIMEOUT_SECONDS = 600.0


def run(env: dict[str, str], args: argparse.Namespace) -> None:
    endpoints = seed_tenants(args.tenants)
    bursts = [
        burst(env, endpoints, rows_per_tenant=args.rows_per_tenant, processes=n)
        for n in args.processes
    ]
    print_bursts(bursts, args)


def seed_tenants(count: int) -> list:
    """`count` tenants, each with its own webhook endpoint (its URL is set per burst)."""
    from tenancy.models import Tenant

    tenants = Tenant.objects.bulk_create([Tenant(name=f"scale {i}") for i in range(count)])
    return [_endpoint(tenant, "http://127.0.0.1:9/hook") for tenant in tenants]


def fresh_burst(endpoints: list, *, rows_per_tenant: int, url: str) -> int:
    """Empty queue and delivery log (and what references them: digests), every endpoint
    pointed at `url`, and `rows_per_tenant` rows due now for each; returns the row count."""
    from django.db import connection
    from django.utils import timezone

    from bench import tick_db
    from delivery.models import WebhookEndpoint

    tick_db.empty_queue()
    WebhookEndpoint.objects.update(url=url)
    due = timezone.now()
    for endpoint in endpoints:
        _rows(tenant=endpoint.tenant, endpoint=endpoint, count=rows_per_tenant, due_at=due)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return len(endpoints) * rows_per_tenant


def burst(env: dict[str, str], endpoints: list, *, rows_per_tenant: int, processes: int) -> Burst:
    log = Path(tempfile.gettempdir()) / f"tw_bench_scale_{processes}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        rows = fresh_burst(endpoints, rows_per_tenant=rows_per_tenant, url=url)
        result = drain(env, Burst(processes=processes, rows=rows), receiver=sink.pid)
    finally:
        sink.kill()
        sink.wait()
    seen = arrivals(log)
    result.received = collections.Counter(webhook_id for _, webhook_id in seen)
    result.spread = seen[-1][0] - seen[0][0] if seen else 0.0
    return result


def drain(env: dict[str, str], result: Burst, *, receiver: int) -> Burst:
    """Start the tick processes, wait until every row is completed (or the timeout), stop
    them; CPU is read until the moment the last row was completed."""
    admin = admin_connection()
    database = env["DATABASE_URL"].rsplit("/", 1)[1]
    ticks: list[subprocess.Popen] = []

    def groups() -> dict[str, list[int]]:
        return {
            "database": server_processes(admin, database),
            "receiver": [receiver],
            # A tick's sending process is the tick's CPU too.
            "ticks": [pid for tick in ticks for pid in (tick.pid, *children_of(tick.pid))],
            "bench": [os.getpid()],
        }

    watch = CpuWatch(groups)
    started = time.monotonic()
    ticks += [start_tick(env) for _ in range(result.processes)]
    lines = TickLines(ticks, started)
    deadline = started + DRAIN_TIMEOUT_SECONDS
    while (done := completed()) < result.rows and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        watch.sample()
    result.wall = time.monotonic() - started
    watch.sample()
    result.completed = done
    result.cpu, result.machine = watch.spent()
    for tick in ticks:
        tick.send_signal(signal.SIGTERM)
    for tick in ticks:
        tick.wait(timeout=120)
    lines.join()
    admin.close()
    result.ticks, result.early, result.stderr = lines.summaries, lines.early, lines.stderr
    return result


def start_tick(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "manage.py", "run_tick", "--loop", "--interval", TICK_INTERVAL],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def completed() -> int:
    from delivery.models import Notification
    from delivery.states import NotificationState

    return Notification.objects.filter(state=NotificationState.COMPLETED).count()


class TickLines:
    """Reads the tick processes' summary lines as they come. When a tick reports that it
    ended with nothing due (due_left=0), the due, unclaimed rows are counted at once: rows
    it left behind wait for its next pass, an interval later."""

    def __init__(self, ticks: list[subprocess.Popen], started: float) -> None:
        self.started = started
        self.summaries: list[dict[str, str]] = []
        self.early: list[tuple[float, int, int]] = []
        self.stderr: list[str] = []
        self.threads = [
            threading.Thread(target=target, args=(index, stream))
            for index, tick in enumerate(ticks)
            for target, stream in ((self._summaries, tick.stdout), (self._errors, tick.stderr))
        ]
        for thread in self.threads:
            thread.start()

    def _summaries(self, index: int, stream) -> None:
        from django.db import connection
        from django.utils import timezone

        from delivery.scheduler.context import due_rows_left

        for line in stream:
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            if fields.get("event") != "run_tick":
                continue
            at = time.monotonic() - self.started
            self.summaries.append({**fields, "process": str(index + 1), "ended_s": f"{at:.1f}"})
            if fields.get("due_left") == "0" and (left := due_rows_left(now=timezone.now())):
                self.early.append((at, index, left))
        connection.close()

    def _errors(self, index: int, stream) -> None:
        self.stderr += [f"tick {index + 1}: {line.rstrip()}" for line in stream]

    def join(self) -> None:
        for thread in self.threads:
            thread.join()


class CpuWatch:
    """CPU seconds spent by groups of processes since the watch began, from /proc. Each
    sample reads every process the groups name then: one first seen after the start counts
    from zero (it began inside the window), one that has ended keeps its last reading."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]]) -> None:
        self.groups = groups
        self.start: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.machine_start = machine_busy_seconds()
        self.sample(first=True)

    def sample(self, *, first: bool = False) -> None:
        for group, pids in self.groups().items():
            for pid in pids:
                if (used := cpu_seconds(pid)) is not None:
                    self.start.setdefault((group, pid), used if first else 0.0)
                    self.last[group, pid] = used

    def spent(self) -> tuple[dict[str, float], float]:
        """CPU seconds by group, and the whole machine's busy CPU seconds."""
        by_group: dict[str, float] = collections.defaultdict(float)
        for (group, pid), used in self.last.items():
            by_group[group] += used - self.start[group, pid]
        return dict(by_group), machine_busy_seconds() - self.machine_start


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent on anything but idling and waiting for I/O."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
