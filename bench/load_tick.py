"""Scheduler load scenarios for bench/load.py: real ticks against real local HTTP servers.

- burst: 10,000 due webhook rows of one tenant and one row of another tenant due a second
  later; ticks run back to back (each stands for one cron minute) until nothing is due.
  Prints the time to drain, the ticks needed, and the quiet tenant's lateness and arrival
  rank at the receiver.
- dead_endpoint: 300 rows to an endpoint that accepts connections and never answers, ahead
  of 20 rows of a healthy tenant. Prints the healthy rows' lateness from the tick's start, the
  tick's duration and the connections opened to the dead endpoint, for two ticks.
- soak: 1,200 FREQ=MINUTELY rows (1,000 webhook, 200 email) under `run_tick --loop
  --interval 10` for a few minutes: outcomes, skipped occurrences, lateness p50/p99 from the
  delivery log, and the worker's memory.
- email_burst: 300, then 10,000 email rows of one tenant due at once and one of another tenant
  a second later, through the fake Resend at 2 requests/s: ticks needed, time until the last
  email was sent, requests, 429s, duplicate sends (counted by the fake) and dead letters.

Default settings throughout (CHANNEL_TIMEOUT_SECONDS 10, TICK_TIME_BUDGET_SECONDS 40), but
private targets allowed. Prints figures; never judges.
"""

import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_recording_sink(log: Path, *, two_writes: bool = False) -> tuple[subprocess.Popen, str]:
    """A fast 200 receiver in its own process that appends `<unix time> <webhook-id>` per
    request to `log`; `two_writes`: one that writes its headers and body apart, Nagle on."""
    receiver = [str(ROOT / "bench" / "tick_sink.py"), "--record", str(log)]
    sink = subprocess.Popen(
        [sys.executable, *receiver, *(["--two-writes"] if two_writes else [])],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = sink.stdout.readline().strip()
    return sink, f"http://127.0.0.1:{port}/hook"


def arrivals(log: Path) -> list[tuple[float, str]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return sorted((float(at), msg_id) for at, msg_id in (line.split() for line in lines))


class SilentServer:
    """Accepts connections and never answers; counts the connections it accepted."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


def _rows(*, tenant, endpoint, count: int, due_at) -> list:
    from delivery.models import Notification

    return Notification.objects.bulk_create(
        [
            Notification(
                tenant=tenant,
                channels=["webhook"],
                webhook_endpoint=endpoint,
                subject="Load",
                next_fire_at=due_at,
                recurrence_anchor=due_at,
            )
            for _ in range(count)
        ],
        batch_size=1000,
    )


def _endpoint(tenant, url: str):
    from delivery.models import WebhookEndpoint
    from delivery.transports.signing import generate_secret

    return WebhookEndpoint.objects.create(tenant=tenant, url=url, secret=generate_secret())


def burst(db: str, *, rows: int = 10_000, two_writes: bool = False) -> None:
    from django.utils import timezone

    from delivery.models import Notification
    from delivery.scheduler.tick import run_tick
    from tenancy.models import Tenant

    log = Path(tempfile.gettempdir()) / f"tw_bench_burst_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log, two_writes=two_writes)
    receiver = "two-write" if two_writes else "one-write"
    try:
        noisy, quiet = Tenant.objects.create(name="noisy"), Tenant.objects.create(name="quiet")
        due = timezone.now() - timedelta(seconds=2)
        _rows(tenant=noisy, endpoint=_endpoint(noisy, url), count=rows, due_at=due)
        quiet_due = due + timedelta(seconds=1)
        quiet_endpoint = _endpoint(quiet, url)
        [quiet_row] = _rows(tenant=quiet, endpoint=quiet_endpoint, count=1, due_at=quiet_due)
        started, ticks, delivered = time.time(), [], 0
        # Finished rows are kept (completed, next_fire_at NULL): drained means none is due.
        while Notification.objects.filter(next_fire_at__isnull=False).exists() and len(ticks) < 60:
            summary = run_tick()
            ticks.append(summary)
            delivered += summary.delivered
        drained = time.time() - started
        seen = arrivals(log)
        quiet_id = f"notification_{quiet_row.id}_1"
        rank = next((i for i, (_, msg) in enumerate(seen, 1) if msg == quiet_id), None)
        quiet_at = next((at for at, msg in seen if msg == quiet_id), None)
        print(
            f"[{db}] burst ({receiver} receiver): {rows + 1} rows drained in {drained:.1f}s "
            f"by {len(ticks)} tick(s) "
            f"(first tick: {ticks[0].delivered} delivered in {ticks[0].duration:.1f}s, "
            f"{ticks[0].delivered / max(ticks[0].duration, 1e-9):.0f}/s); all within "
            f"{seen[-1][0] - due.timestamp():.1f}s of due"
        )
        if rank is not None:
            quiet_late = quiet_at - quiet_due.timestamp()
            print(
                f"[{db}] burst: quiet tenant's row arrived {quiet_late:+.2f}s after its due time,"
                f" rank {rank} of {len(seen)} ({100 * rank / len(seen):.2f}%)"
            )
    finally:
        sink.kill()
        sink.wait()


def dead_endpoint(db: str, *, dead_rows: int = 300, healthy_rows: int = 20) -> None:
    from django.utils import timezone

    from delivery.scheduler.tick import run_tick
    from tenancy.models import Tenant

    log = Path(tempfile.gettempdir()) / f"tw_bench_dead_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    silent = SilentServer()
    try:
        broken, healthy = Tenant.objects.create(name="broken"), Tenant.objects.create(name="ok")
        due = timezone.now() - timedelta(seconds=2)
        _rows(tenant=broken, endpoint=_endpoint(broken, silent.url), count=dead_rows, due_at=due)
        _rows(
            tenant=healthy,
            endpoint=_endpoint(healthy, url),
            count=healthy_rows,
            due_at=due + timedelta(seconds=1),
        )
        for tick_number in (1, 2):
            opened_before = silent.accepted
            tick_started = time.time()
            summary = run_tick()
            late = [at - tick_started for at, _ in arrivals(log)]
            print(
                f"[{db}] dead endpoint, tick {tick_number}: {summary.duration:.1f}s, "
                f"{silent.accepted - opened_before} connections to the dead endpoint, "
                f"deferred={summary.deferred} backed_off={summary.backed_off} "
                f"delivered={summary.delivered}"
            )
            if tick_number == 1 and late:
                print(
                    f"[{db}] dead endpoint: healthy rows delivered {len(late)}/{healthy_rows}, "
                    f"from tick start: median {statistics.median(late):.2f}s, "
                    f"max {max(late):.2f}s"
                )
    finally:
        silent.close()
        sink.kill()
        sink.wait()


def soak(db: str, *, minutes: float = 3.0, webhooks: int = 1000, emails: int = 200) -> None:
    """FREQ=MINUTELY rows (webhooks to a local sink, emails to Django's locmem backend)
    delivered by `run_tick --loop --interval 10` for `minutes`: due minutes delivered or
    skipped, lateness p50/p99 from the delivery log, and the worker's memory over time."""
    import os
    import signal

    from django.db.models import Count
    from django.utils import timezone

    from delivery.models import Delivery, Notification
    from tenancy.models import Tenant

    log = Path(tempfile.gettempdir()) / f"tw_bench_soak_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        tenant = Tenant.objects.create(name="soak")
        endpoint = _endpoint(tenant, url)
        start = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
        common = {"tenant": tenant, "subject": "Soak", "rrule": "FREQ=MINUTELY"}
        common |= {"next_fire_at": start, "due_at": start, "recurrence_anchor": start}
        Notification.objects.bulk_create(
            [
                Notification(channels=["webhook"], webhook_endpoint=endpoint, **common)
                for _ in range(webhooks)
            ]
            + [
                Notification(channels=["email"], email_to=["soak@example.com"], **common)
                for _ in range(emails)
            ],
            batch_size=1000,
        )
        env = {**os.environ, "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"}
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "run_tick", "--loop", "--interval", "10"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        rss = []
        until = time.time() + (start - timezone.now()).total_seconds() + minutes * 60
        while time.time() < until:
            time.sleep(10)
            status = Path(f"/proc/{worker.pid}/status").read_text()
            rss.append(int(next(ln.split()[1] for ln in status.splitlines() if "VmRSS" in ln)))
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)
        attempts = Delivery.objects.filter(late_ms__isnull=False)
        late = sorted(attempts.values_list("late_ms", flat=True))
        per_outcome = dict(
            Delivery.objects.values_list("outcome")
            .annotate(n=Count("pk"))
            .values_list("outcome", "n")
        )
        skips = Delivery.objects.filter(outcome="skipped").values_list("skipped_count", flat=True)
        skipped = sum(skips)
        due_minutes = int(minutes) * (webhooks + emails)
        print(
            f"[{db}] soak {minutes:g} min, {webhooks + emails} minutely rows: outcomes "
            f"{per_outcome}, {skipped} occurrences skipped, about {due_minutes} due "
            f"minutes; lateness p50 {late[len(late) // 2] / 1000:.1f}s p99 "
            f"{late[int(len(late) * 0.99)] / 1000:.1f}s max {late[-1] / 1000:.1f}s; "
            f"worker RSS {rss[0] // 1024}→{rss[-1] // 1024} MiB"
        )
    finally:
        sink.kill()
        sink.wait()


def _email_rows(*, tenant, count: int, due_at, prefix: str) -> list:
    from delivery.models import Notification

    return Notification.objects.bulk_create(
        [
            Notification(
                tenant=tenant,
                channels=["email"],
                email_to=[f"{prefix}{i}@example.com"],
                subject="Load",
                body="Reminder",
                next_fire_at=due_at,
                due_at=due_at,
                recurrence_anchor=due_at,
            )
            for i in range(count)
        ],
        batch_size=1000,
    )


def email_burst(db: str, *, sizes: tuple[int, ...] = (300, 10_000), rate: float = 2.0) -> None:
    """`size` email rows of one tenant due at once, and one of another tenant due a second
    later, sent through the fake Resend at `rate` requests per second (its token bucket, its
    429s and its count of emails actually sent): ticks back to back until nothing is due."""
    from django.conf import settings
    from django.utils import timezone

    from delivery.models import Delivery, DeliveryOutcome, Notification
    from delivery.scheduler.tick import run_tick
    from tenancy.models import Tenant
    from tests.support.fake_resend import fake_resend

    for size in sizes:
        Notification.objects.all().delete()
        with fake_resend(rate=rate) as resend:
            settings.RESEND_API_KEY, settings.RESEND_API_URL = resend.api_key, resend.url
            settings.RESEND_RATE_LIMIT = rate
            noisy = Tenant.objects.create(name=f"noisy {size}")
            quiet = Tenant.objects.create(name=f"quiet {size}")
            due = timezone.now()
            due_clock = time.monotonic()
            _email_rows(tenant=noisy, count=size, due_at=due, prefix="noisy")
            quiet_due = due + timedelta(seconds=1)
            _email_rows(tenant=quiet, count=1, due_at=quiet_due, prefix="quiet")
            ticks = []
            while Notification.objects.exists() and len(ticks) < 30:
                ticks.append(run_tick())
                print(f"[{db}] email_burst tick {len(ticks)}: {ticks[-1].line()}", flush=True)
            sent = resend.sent
            answered = {r.number: r.answered_at for r in resend.requests}
            last = max(answered[e.request_number] for e in sent) - due_clock if sent else 0.0
            quiet_sent = [e for e in sent if e.to == ["quiet0@example.com"]]
            rank = sent.index(quiet_sent[0]) + 1 if quiet_sent else None
            dead = Delivery.objects.filter(outcome=DeliveryOutcome.DEAD_LETTERED).count()
            print(
                f"[{db}] email_burst {size + 1} rows at {rate:g} req/s: {len(sent)} sent by "
                f"{len(ticks)} tick(s) (first tick: {ticks[0].delivered} in "
                f"{ticks[0].duration:.1f}s), all within {last:.1f}s of due; "
                f"{len(resend.requests)} requests, {resend.answered(429)} answered 429, "
                f"{sum(resend.duplicates().values())} duplicate sends, {dead} dead-lettered"
            )
            if rank is not None:
                quiet_late = answered[quiet_sent[0].request_number] - due_clock - 1
                print(
                    f"[{db}] email_burst: quiet tenant's email sent {quiet_late:+.2f}s after "
                    f"its due time, rank {rank} of {len(sent)}"
                )
