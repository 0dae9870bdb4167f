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
from dataclasses import dataclass, field
from pathlib import Path

from bench.api import PYTHON, ROOT, cpu_seconds
from bench.load_tick import _endpoint, _rows, arrivals, start_recording_sink
from bench.scale_db import admin_connection, server_processes

TICK_INTERVAL = "1"
POLL_SECONDS = 0.25
DRAIN_TIMEOUT_SECONDS = 600.0
# Above this share of the machine's cores in use, the cores themselves are the limit.
MACHINE_SATURATED = 0.9
NEAR_CEILING = 0.8


@dataclass
class Burst:
    processes: int
    rows: int
    wall: float = 0.0
    completed: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    machine: float = 0.0
    received: collections.Counter = field(default_factory=collections.Counter)
    spread: float = 0.0  # first to last arrival at the receiver, seconds
    ticks: list[dict[str, str]] = field(default_factory=list)
    early: list[tuple[float, int, int]] = field(default_factory=list)  # (at s, process, due)
    stderr: list[str] = field(default_factory=list)


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
    """Empty queue and delivery log, every endpoint pointed at `url`, and `rows_per_tenant`
    rows due now for each; returns the row count."""
    from django.db import connection
    from django.utils import timezone

    from notifications.models import Delivery, Notification, WebhookEndpoint

    tables = ", ".join(model._meta.db_table for model in (Notification, Delivery))
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tables}")
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
            "ticks": [tick.pid for tick in ticks],
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
    from notifications.models import Notification
    from notifications.states import NotificationState

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

        from notifications.scheduler.lateness import due_rows_left

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


RESOURCES = {"database": "database CPU", "receiver": "receiver", "ticks": "tick CPU"}


def ceilings(result: Burst, cores: int) -> dict[str, int]:
    """The cores each resource could use at most: the database all of them; the receiver
    one (one Python process: its threads share one interpreter lock); the ticks one each."""
    return {"database": cores, "receiver": 1, "ticks": min(result.processes, cores)}


def cores_used(result: Burst) -> dict[str, float]:
    """Cores busy on average over the burst (CPU s / wall s): each resource, this bench's
    own process, and `other`: the rest of the machine (other work on a shared machine)."""
    used = {name: result.cpu.get(name, 0.0) / result.wall for name in (*RESOURCES, "bench")}
    used["machine"] = result.machine / result.wall
    used["other"] = used["machine"] - sum(used[name] for name in (*RESOURCES, "bench"))
    return used


def limit(result: Burst, cores: int) -> str:
    """Which resource was nearest saturation, with a one-line reason."""
    used = cores_used(result)
    shares = ", ".join(f"{label} {used[name]:.2f}" for name, label in RESOURCES.items())
    shares += f", this bench {used['bench']:.2f}, other load {used['other']:.2f}"
    if used["machine"] >= MACHINE_SATURATED * cores:
        biggest = max(RESOURCES, key=used.get)
        return (
            f"the machine's {cores} cores: {used['machine']:.2f} of {cores} busy ({shares}); "
            f"the three share them, {RESOURCES[biggest]} took most"
        )
    caps = ceilings(result, cores)
    nearest = max(RESOURCES, key=lambda name: used[name] / caps[name])
    share = used[nearest] / caps[nearest]
    if share >= NEAR_CEILING:
        return (
            f"{RESOURCES[nearest]}: {used[nearest]:.2f} of the {caps[nearest]} core(s) it can "
            f"use ({share:.0%}); machine {used['machine']:.2f} of {cores} busy ({shares})"
        )
    return (
        f"no CPU saturated (nearest: {RESOURCES[nearest]} at {share:.0%} of "
        f"{caps[nearest]} core(s); machine {used['machine']:.2f} of {cores}): the processes "
        "waited (claim and write-back round trips, row locks, idle intervals)"
    )


def print_bursts(bursts: list[Burst], args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    base = bursts[0].rows / bursts[0].wall
    print(
        f"\nticks: {bursts[0].rows:,} due webhook rows over {args.tenants} tenants (an "
        f"endpoint each), drained by N `run_tick --loop` processes; CPU as cores busy "
        f"(CPU s / wall s) of {cores}"
    )
    print(
        f"{'N':>2} {'wall s':>7} {'deliv/s':>8} {'x N=1':>6} {'steady/s':>9} "
        f"{'database':>9} {'receiver':>9} {'ticks':>6} {'bench':>6} {'other':>6} {'machine':>8}"
    )
    for result in bursts:
        rate = result.rows / result.wall
        used = cores_used(result)
        print(
            f"{result.processes:>2} {result.wall:>7.1f} {rate:>8.0f} {rate / base:>5.2f}x "
            f"{result.rows / max(result.spread, 1e-9):>9.0f} {used['database']:>9.2f} "
            f"{used['receiver']:>9.2f} {used['ticks']:>6.2f} {used['bench']:>6.2f} "
            f"{used['other']:>6.2f} {used['machine']:>8.2f}"
        )
    print("steady/s: rows over first to last arrival at the receiver (no start-up)")
    for result in bursts:
        print(f"N={result.processes} limit: {limit(result, cores)}")
    for result in bursts:
        print_cost(result, cores)
    for result in bursts:
        print_checks(result)


def print_cost(result: Burst, cores: int) -> None:
    """CPU per row: the figure other load on a shared machine moves least, and the rate the
    machine's cores would allow if the three had them to themselves."""
    per_row = {name: result.cpu.get(name, 0.0) * 1000 / result.rows for name in RESOURCES}
    total = sum(per_row.values())
    print(
        f"N={result.processes} CPU per row: "
        + ", ".join(f"{RESOURCES[name]} {ms:.2f} ms" for name, ms in per_row.items())
        + f"; together {total:.2f} ms, so {cores} cores to themselves would allow "
        f"about {cores * 1000 / total:.0f} rows/s"
    )


def print_checks(result: Burst) -> None:
    total = sum(result.received.values())
    duplicates = total - len(result.received)
    summed = {
        key: sum(int(tick.get(key, 0)) for tick in result.ticks)
        for key in ("claimed", "delivered", "released", "fenced_out", "errors")
    }
    print(
        f"N={result.processes}: receiver got {len(result.received):,} distinct webhook-ids of "
        f"{result.rows:,} ({duplicates} duplicates), {result.completed:,} rows completed; "
        f"{len(result.ticks)} ticks, " + " ".join(f"{k}={v}" for k, v in summed.items())
    )
    print(
        "  each tick (process: claimed/delivered/released, its duration, ended at, due_left): "
        + "; ".join(
            f"{tick['process']}: {tick['claimed']}/{tick['delivered']}/{tick['released']} "
            f"{float(tick['duration_s']):.1f} s, at {tick['ended_s']} s, {tick['due_left']}"
            for tick in result.ticks
        )
    )
    for at, index, left in result.early:
        print(
            f"  tick of process {index + 1} ended at {at:.1f} s reporting due_left=0 while "
            f"{left} rows were due and unclaimed"
        )
    for line in result.stderr[:5]:
        print(f"  stderr {line}")
    if len(result.stderr) > 5:
        print(f"  ... {len(result.stderr) - 5} more stderr lines")
