"""The looping tick's memory under a steady load, over time. Prints figures; never judges.

    .venv/bin/python bench/tick_memory.py [--load messages|recurring] [--minutes 60]
        [--warmup 5] [--sample 30] [--interval S] [--trace]

On a fresh PostgreSQL database (BENCH_TICK_MEMORY_DB, default tw_bench_tick_memory, DROPPED
and re-created) it starts `manage.py run_tick --loop` as a process of its own, keeps the load
going for --minutes and prints the resident memory (RSS) of the tick and of its sending
process every --sample seconds, then the growth after --warmup minutes and that growth per
hour (a straight line fitted to the samples after the warm-up; extrapolated when the run is
shorter than an hour). Webhooks go to real receivers on 127.0.0.1 (http.server, one per
endpoint, in this process); e-mails to Django's dummy backend, which keeps nothing.

Loads (--interval defaults to 10 s for both):
- messages: 5 messages a second (the service behind POST /v1/messages) to one tenant's 18
  webhook endpoints, and 2 digest joins a second (the service behind POST /v1/notifications
  with `digest`) over 20 recipients with 60 s windows: about 90 deliveries a second.
- recurring: 1,200 FREQ=MINUTELY rows (1,000 webhooks to 18 endpoints, 200 e-mails).

With --trace the tick runs in-process under tracemalloc instead (`--traced-tick`, slower):
after --warmup minutes it takes a snapshot between two ticks, and at every --sample after it
prints the allocation sites that grew most since (compare_to by traceback) and the types of
live objects (gc.get_objects) whose counts grew most: where the memory goes.

Ctrl-C ends a run early and prints the figures so far.
"""

import argparse
import collections
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_BENCH_DB = os.environ.get("BENCH_TICK_MEMORY_DB", "tw_bench_tick_memory")
ENDPOINTS = 18
MESSAGES_PER_SECOND = 5.0
DIGEST_JOINS_PER_SECOND = 2.0
DIGEST_RECIPIENTS = 20
DIGEST_WINDOW_SECONDS = 60
RECURRING_WEBHOOKS = 1_000
RECURRING_EMAILS = 200
EVENT_TYPE = "order.created"


def tick_env() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{PG_BENCH_DB}",
        "SECRET_KEY": "bench-only-secret-key",
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def prepare_database() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {PG_BENCH_DB}")
    os.environ.update(tick_env())
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# --- Receivers -----------------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    received = 0  # across every receiver; += under the GIL may lose a few, a gauge only

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Receiver.received += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def start_receivers(count: int) -> list[str]:
    """`count` webhook receivers on 127.0.0.1, each on a port of its own; their URLs."""
    urls = []
    for _ in range(count):
        server = _Server(("127.0.0.1", 0), _Receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        urls.append(f"http://127.0.0.1:{server.server_address[1]}/hook")
    return urls


# --- Loads ---------------------------------------------------------------------------------


def seed(load: str, urls: list[str]):
    """The tenant, its endpoints and, for `recurring`, its minutely rows."""
    from datetime import timedelta

    from django.utils import timezone

    from delivery.models import Notification
    from people.recipients import recipient_put
    from tenancy.models import Tenant
    from webhooks.endpoints import webhook_endpoint_create
    from webhooks.event_types import event_type_create

    tenant = Tenant.objects.create(name="memory")
    event_type_create(tenant=tenant, name=EVENT_TYPE)
    endpoints = [webhook_endpoint_create(tenant=tenant, url=url) for url in urls]
    now = timezone.now()
    for i in range(DIGEST_RECIPIENTS):
        recipient_put(tenant=tenant, key=f"person-{i}", email=f"person-{i}@example.com", now=now)
    if load == "recurring":
        start = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        common = {"tenant": tenant, "subject": "Soak", "rrule": "FREQ=MINUTELY"}
        common |= {"next_fire_at": start, "due_at": start, "recurrence_anchor": start}
        Notification.objects.bulk_create(
            [
                Notification(
                    channels=["webhook"], webhook_endpoint=endpoints[i % len(endpoints)], **common
                )
                for i in range(RECURRING_WEBHOOKS)
            ]
            + [
                Notification(channels=["email"], email_to=["soak@example.com"], **common)
                for _ in range(RECURRING_EMAILS)
            ],
            batch_size=1000,
        )
    return tenant


class Producer(threading.Thread):
    """5 messages and 2 digest joins a second, on a fixed schedule (a late one is made at
    once, never skipped), until stopped."""

    def __init__(self, tenant) -> None:
        super().__init__(daemon=True)
        self.tenant = tenant
        self.stopped = threading.Event()
        self.messages = 0
        self.joins = 0

    def run(self) -> None:
        from django.db import connection

        try:
            began = time.monotonic()
            while not self.stopped.is_set():
                elapsed = time.monotonic() - began
                if self.messages <= elapsed * MESSAGES_PER_SECOND:
                    self._message()
                elif self.joins <= elapsed * DIGEST_JOINS_PER_SECOND:
                    self._join()
                else:
                    self.stopped.wait(0.02)
        finally:
            connection.close()

    def _message(self) -> None:
        from webhooks.messages import publish_message

        payload = {"order": self.messages, "items": [{"sku": "A-1", "qty": 2}] * 5}
        publish_message(tenant=self.tenant, event_type=EVENT_TYPE, payload=payload)
        self.messages += 1

    def _join(self) -> None:
        from notifications.services import notification_create

        notification_create(
            tenant=self.tenant,
            channels=["email"],
            subject=f"Event {self.joins}",
            body="Something happened.",
            recipients=[f"person-{self.joins % DIGEST_RECIPIENTS}"],
            digest={"key": "activity", "window_seconds": DIGEST_WINDOW_SECONDS},
        )
        self.joins += 1


# --- Measuring -----------------------------------------------------------------------------


def rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0)
    return kb / 1024


def children_of(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return children


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    """The least-squares slope of (seconds, MB) samples, in MB per hour."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / len(samples)
    mean_m = sum(m for _, m in samples) / len(samples)
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (m - mean_m) for t, m in samples) / spread * 3600


def outcomes() -> dict[str, int]:
    from django.db.models import Count

    from delivery.models import Delivery

    return dict(Delivery.objects.values_list("outcome").annotate(n=Count("pk")))


def _sample(
    args: argparse.Namespace,
    tick: subprocess.Popen,
    producer: "Producer | None",
    began: float,
    samples: list[tuple[float, float]],
    children_seen: list[float],
) -> None:
    while (elapsed := time.monotonic() - began) < args.minutes * 60:
        time.sleep(min(args.sample, args.minutes * 60 - elapsed))
        elapsed = time.monotonic() - began
        tick_rss = rss_mb(tick.pid)
        if tick_rss is None or tick.poll() is not None:
            raise SystemExit(f"the tick ended early (exit {tick.poll()})")
        child_rss = [rss for pid in children_of(tick.pid) if (rss := rss_mb(pid))]
        children_seen += child_rss
        samples.append((elapsed, tick_rss))
        made = f", {producer.messages} messages {producer.joins} joins" if producer else ""
        print(
            f"  {elapsed / 60:6.1f} min  tick RSS {tick_rss:6.1f} MB  sending process "
            f"{' + '.join(f'{rss:.1f}' for rss in child_rss) or '-':>6} MB  "
            f"{_Receiver.received} webhooks received{made}",
            flush=True,
        )


def run(args: argparse.Namespace) -> None:
    prepare_database()
    urls = start_receivers(ENDPOINTS)
    tenant = seed(args.load, urls)
    producer = Producer(tenant) if args.load == "messages" else None
    command = ["manage.py", "run_tick", "--loop", "--interval", str(args.interval)]
    if args.trace:
        command = [str(Path(__file__).resolve()), "--traced-tick", *_trace_arguments(args)]
    output = None if args.trace else subprocess.DEVNULL
    tick = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=tick_env(), stdout=output)
    print(
        f"tick_memory: load {args.load}, run_tick --loop --interval {args.interval:g}"
        f"{' (traced in-process)' if args.trace else ''}, pid {tick.pid}, "
        f"{args.minutes:g} min, warm-up {args.warmup:g} min",
        flush=True,
    )
    if producer is not None:
        producer.start()
    samples: list[tuple[float, float]] = []
    children_seen: list[float] = []
    began = time.monotonic()
    try:
        _sample(args, tick, producer, began, samples, children_seen)
    except KeyboardInterrupt:
        print("interrupted: the figures so far", flush=True)
    finally:
        if producer is not None:
            producer.stopped.set()
            producer.join()
        tick.send_signal(signal.SIGTERM)
        tick.wait(timeout=120)
    settled = [(t, rss) for t, rss in samples if t >= args.warmup * 60]
    if not settled:
        print("no sample after the warm-up")
        return
    hours = (settled[-1][0] - settled[0][0]) / 3600
    per_hour = slope_per_hour(settled)
    print(
        f"tick RSS after warm-up {settled[0][1]:.1f} MB, at the end {settled[-1][1]:.1f} MB: "
        f"{settled[-1][1] - settled[0][1]:+.1f} MB in {hours * 60:.1f} min; fitted "
        f"{per_hour:+.2f} MB/hour{' (extrapolated)' if hours < 1 else ''}"
    )
    if children_seen:
        print(
            f"sending process RSS: {min(children_seen):.1f}-{max(children_seen):.1f} MB "
            f"over {len(children_seen)} samples (one process per busy tick)"
        )
    else:
        print("sending process: not running at any sample")
    print(f"delivery log outcomes: {outcomes()}")
    if producer is not None:
        print(f"made: {producer.messages} messages, {producer.joins} digest joins")


# --- In-process, traced --------------------------------------------------------------------


def _trace_arguments(args: argparse.Namespace) -> list[str]:
    return [
        f"--interval={args.interval}",
        f"--warmup={args.warmup}",
        f"--sample={args.sample}",
        f"--trace-frames={args.trace_frames}",
    ]


def _type_counts() -> collections.Counter:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


def traced_tick(args: argparse.Namespace) -> None:
    """The run_tick worker in this process, looked at between two ticks: the Python objects
    the garbage collector tracks and the memory blocks Python and malloc hold, the types of
    live objects whose counts grew since the warm-up, and how many objects a full collection
    finds unreachable (cycles nothing collected); with --trace-frames, tracemalloc's
    allocation sites that grew most (compare_to by traceback)."""
    import django

    if args.trace_frames:
        tracemalloc.start(args.trace_frames)
    django.setup()
    from delivery.scheduler.tick import tick_worker

    worker = tick_worker(max_rows=None, interval=args.interval, report=_quiet, report_error=print)
    one_pass = worker.one_pass
    state: dict = {"began": time.monotonic(), "next": args.warmup * 60, "ticks": 0}

    def pass_then_look(stop: threading.Event):
        summary = one_pass(stop)
        state["ticks"] += 1
        elapsed = time.monotonic() - state["began"]
        if elapsed >= state["next"]:
            state["next"] = elapsed + args.sample
            _look(state, elapsed, frames=args.trace_frames)
        return summary

    worker.one_pass = pass_then_look
    worker.run(loop=True)


def _census() -> str:
    malloc = _mallinfo()
    return (
        f"{len(gc.get_objects())} tracked objects, {sys.getallocatedblocks()} Python blocks, "
        f"malloc {malloc[0] / 2**20:.1f} MB in use {malloc[1] / 2**20:.1f} MB free, "
        f"RSS {rss_mb(os.getpid()):.1f} MB"
    )


def _mallinfo() -> tuple[int, int]:
    """glibc's bytes in use and free in its heaps (mallinfo2: uordblks + hblkhd, fordblks)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in [
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            ]
        ]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd, info.fordblks


def _look(state: dict, elapsed: float, *, frames: int) -> None:
    noise = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, __file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
    ]
    ticks = state["ticks"] - state.get("at_ticks", 0)
    print(f"[traced] {elapsed / 60:.1f} min, {ticks} ticks: {_census()}", flush=True)
    unreachable = gc.collect()
    print(f"  a full collection finds {unreachable} unreachable; then {_census()}", flush=True)
    counts = _type_counts()
    snapshot = tracemalloc.take_snapshot().filter_traces(noise) if frames else None
    if "counts" not in state:
        state["counts"], state["snapshot"], state["at_ticks"] = counts, snapshot, state["ticks"]
        print("  (the baseline)", flush=True)
        return
    grown = counts.copy()
    grown.subtract(state["counts"])
    print("  live objects grown: " + ", ".join(f"{n:+d} {t}" for t, n in grown.most_common(15)))
    if snapshot is not None:
        for stat in snapshot.compare_to(state["snapshot"], "traceback")[:10]:
            if stat.size_diff <= 0:
                break
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
            for line in stat.traceback.format(limit=frames, most_recent_first=True):
                print(f"      {line}")
    sys.stdout.flush()


def _quiet(line: str) -> None:
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", choices=["messages", "recurring"], default="messages")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes before the baseline")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--interval", type=float, default=10.0, help="run_tick --interval")
    parser.add_argument("--trace", action="store_true", help="the tick in-process, looked at")
    parser.add_argument(
        "--trace-frames", type=int, default=0, help="with --trace: tracemalloc, N frames deep"
    )
    parser.add_argument("--traced-tick", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.traced_tick:
        traced_tick(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
