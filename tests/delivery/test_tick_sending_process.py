"""The tick's sending process (delivery/scheduler/sending_process.py): once a tick on
PostgreSQL has a burst of webhooks, a child process sends them; it vets, signs and keeps
connections as the tick does, its silence or death fails the webhooks it held (retried, no
circuit signal), and it never outlives the tick's process."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification, WebhookEndpoint
from delivery.scheduler import sending_process, tick
from delivery.scheduler.sending_process import OnASpareCore, SendingProcess, sending_for_this_tick
from delivery.transports.base import WebhookMessage
from delivery.transports.signing import generate_secret, sign
from outbound.categories import ErrorCategory
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import RecordedRequest, Reply, recording_server

ROWS = 60
WORKERS = 4
# The webhooks a tick sends itself before it starts its sending process.
IN_PROCESS = sending_process.WAVES_BEFORE_A_PROCESS * WORKERS


def wait_until(condition: Callable[[], bool]) -> None:
    """Wait for a condition another process or thread brings about (30 s at most)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.01)


def signature_holds(request: RecordedRequest, secret: str) -> bool:
    headers = {name.lower(): value for name, value in request.headers.items()}
    expected = sign(
        secrets=[secret],
        msg_id=headers["webhook-id"],
        timestamp=int(headers["webhook-timestamp"]),
        body=request.body,
    )
    return headers["webhook-signature"] == expected


def message(url: str, secret: str, n: int = 0) -> WebhookMessage:
    return WebhookMessage(url=url, secrets=(secret,), msg_id=f"msg_{n}", payload={"n": n})


@pytest.fixture
def processes(monkeypatch) -> list[SendingProcess]:
    """The sending processes the ticks start, each handed webhooks only once it is up (so
    which webhooks it sends does not depend on how fast it starts)."""
    started: list[SendingProcess] = []

    def recording(*, concurrency: int):
        starter = sending_for_this_tick(concurrency=concurrency)
        if starter is None:
            return None

        def started_and_up() -> SendingProcess:
            process = starter.start()  # whether a core is spare is not this test's question
            started.append(process)
            wait_until(lambda: process.ready or not process.alive)
            return process

        return started_and_up

    monkeypatch.setattr(tick, "sending_for_this_tick", recording)
    return started


@pytest.fixture
def burst_settings(settings):
    settings.TICK_CONCURRENCY = WORKERS
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = WORKERS
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.TICK_SENDING_PROCESS = True
    return settings


def due_rows(url: str) -> WebhookEndpoint:
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=url)
    make_notifications(
        ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
    )
    return endpoint


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_burst_goes_out_from_the_sending_process(burst_settings, processes):
    with recording_server() as server:
        endpoint = due_rows(server.url)
        summary = tick.run_tick(max_rows=ROWS, time_budget=120)
        received, accepted = server.received(), server.accepted

    assert summary.delivered == ROWS
    assert len({r.headers["webhook-id"] for r in received}) == ROWS == len(received)
    assert all(signature_holds(r, endpoint.secret) for r in received)
    [process] = processes
    # The tick sent a few waves itself, and the webhooks that found it less busy.
    assert 0 < process.handed_over <= ROWS - IN_PROCESS
    assert process.process.returncode is not None  # ended with the tick
    # Kept alive: the tick's connections and the child's, a worker's worth each at most.
    assert accepted <= 2 * WORKERS
    assert not Notification.objects.exclude(state="completed").exists()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_webhooks_a_dead_sending_process_held_are_retried_later(
    burst_settings, processes, monkeypatch
):
    """The receiver kills the child while it holds webhooks: those come back as failed
    attempts of category internal (retried, no circuit signal) and the tick sends the rest
    itself. No row is lost or left claimed."""

    def responder(request: RecordedRequest) -> Reply:
        if request.headers["webhook-id"] in handed_over and not killed:
            killed.append(request.headers["webhook-id"])
            os.kill(processes[0].process.pid, signal.SIGKILL)  # before it hears the answer
        return Reply(200)

    handed_over: set[str] = set()
    killed: list[str] = []
    submit = SendingProcess.submit

    def noting_submit(self, message, **kwargs):
        future = submit(self, message, **kwargs)
        if future is not None:  # queued, not yet sent: noted before the receiver sees it
            handed_over.add(message.msg_id)
        return future

    monkeypatch.setattr(SendingProcess, "submit", noting_submit)

    with recording_server(responder) as server:
        endpoint = due_rows(server.url)
        summary = tick.run_tick(max_rows=ROWS, time_budget=120)

    failed = Delivery.objects.filter(outcome="failed")
    assert killed and failed.exists()
    assert set(failed.values_list("error_category", flat=True)) == {ErrorCategory.INTERNAL}
    assert set(failed.values_list("error", flat=True)) == {"the sending process ended"}
    assert summary.delivered + summary.backed_off == ROWS
    assert summary.backed_off == failed.count()
    backed_off = Notification.objects.filter(state="backing_off")
    assert backed_off.count() == summary.backed_off
    assert all(row.error_count == 1 and row.claimed_until is None for row in backed_off)
    assert Notification.objects.filter(state="completed").count() == summary.delivered
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0  # the endpoint was not at fault
    assert processes[0].handed_over < ROWS - IN_PROCESS  # the tick sent the rest itself


def test_the_sending_process_signs_and_sends_what_it_is_handed():
    secret = generate_secret()
    with recording_server() as server:
        process = SendingProcess(concurrency=2, allow_private=True)
        try:
            wait_until(lambda: process.ready)
            futures = [
                process.submit(message(server.url, secret, n), timeout=10, then=lambda r: r)
                for n in range(5)
            ]
            process.flush()
            results = [future.result(timeout=30) for future in futures]
        finally:
            process.close()
        received = server.received()

    assert all(result.ok and result.http_status == 200 for result in results)
    assert sorted(r.headers["webhook-id"] for r in received) == [f"msg_{n}" for n in range(5)]
    assert all(signature_holds(r, secret) for r in received)


def test_the_sending_process_vets_targets_as_the_tick_says():
    """With private targets not allowed, the child refuses a plain-http, loopback URL
    before any connection is made."""
    with recording_server() as server:
        process = SendingProcess(concurrency=1, allow_private=False)
        try:
            wait_until(lambda: process.ready)
            future = process.submit(
                message(server.url, generate_secret()), timeout=10, then=lambda r: r
            )
            process.flush()
            result = future.result(timeout=30)
        finally:
            process.close()
        accepted = server.accepted
    assert accepted == 0
    assert not result.ok and result.permanent
    assert result.category == ErrorCategory.SSRF_BLOCKED


def test_a_silent_sending_process_fails_its_webhooks_after_their_deadline(monkeypatch):
    monkeypatch.setattr(sending_process, "GRACE_SECONDS", 0.0)
    monkeypatch.setattr(sending_process, "_OVERDUE_CHECK_SECONDS", 0.05)
    with recording_server() as server:
        process = SendingProcess(concurrency=1, allow_private=True)
        try:
            wait_until(lambda: process.ready)
            os.kill(process.process.pid, signal.SIGSTOP)
            future = process.submit(
                message(server.url, generate_secret()), timeout=0.2, then=lambda r: r
            )
            process.flush()
            result = future.result(timeout=30)
        finally:
            os.kill(process.process.pid, signal.SIGCONT)
            process.close()

    assert not result.ok and not result.permanent
    assert result.category == ErrorCategory.INTERNAL
    assert result.error == "no answer from the sending process in time"


def test_the_sending_process_imports_nothing_of_django():
    """The child's side starts without Django: the sooner it is up, the fewer of a burst's
    webhooks the tick sends itself meanwhile."""
    probe = (
        "import sys\n"
        "import delivery.scheduler.sending_child\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'django'))\n"
    )
    imported = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )
    assert imported.stdout.strip() == "[]"


def test_the_sending_process_ends_when_the_tick_is_killed_outright():
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from delivery.scheduler.sending_process import SendingProcess\n"
            "import time\n"
            "process = SendingProcess(concurrency=1, allow_private=False)\n"
            "print(process.process.pid, flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )
    assert owner.stdout is not None
    child = int(owner.stdout.readline())
    owner.kill()
    owner.wait()

    def gone() -> bool:
        try:
            with open(f"/proc/{child}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # exited, unreaped
        except FileNotFoundError:
            return True

    wait_until(gone)


def test_no_sending_process_in_a_transaction(db, settings):
    settings.TICK_SENDING_PROCESS = True
    assert sending_for_this_tick(concurrency=4) is None


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_the_sending_process_is_for_postgresql_outside_a_transaction_when_on(settings):
    settings.TICK_SENDING_PROCESS = True
    assert sending_for_this_tick(concurrency=4) is not None
    settings.TICK_SENDING_PROCESS = False
    assert sending_for_this_tick(concurrency=4) is None


@pytest.mark.django_db
def test_a_tick_that_cannot_start_its_sending_process_sends_everything_itself(
    burst_settings, monkeypatch
):
    def no_process() -> SendingProcess:
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(tick, "sending_for_this_tick", lambda *, concurrency: no_process)
    with recording_server() as server:
        due_rows(server.url)
        summary = tick.run_tick(max_rows=ROWS, time_budget=120)
        received = server.received()

    assert summary.delivered == ROWS == len({r.headers["webhook-id"] for r in received})
    assert not Notification.objects.exclude(state="completed").exists()


class FakeStart:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return "a sending process"


def machine(monkeypatch, readings: list[tuple[int, int] | None]) -> None:
    """/proc/stat's (idle, total) clock ticks, one reading at a time."""
    monkeypatch.setattr(sending_process, "_cpu_times", lambda: readings.pop(0))
    monkeypatch.setattr(sending_process.os, "cpu_count", lambda: 2)


def test_the_sending_process_starts_only_with_a_core_to_spare(monkeypatch):
    monkeypatch.setattr(OnASpareCore, "CHECK_SECONDS", 0.0)
    # Two cores: 10% idle (0.2 of a core) between the first two readings, then 50% (one).
    machine(monkeypatch, [(0, 1000), (100, 2000), (600, 3000)])
    start = FakeStart()
    starter = OnASpareCore(start)

    assert starter() is None
    assert starter() == "a sending process"
    assert start.calls == 1


def test_the_sending_process_is_not_asked_for_again_at_once(monkeypatch):
    machine(monkeypatch, [(0, 1000), (900, 2000)])
    start = FakeStart()
    starter = OnASpareCore(start)
    starter.asked_at = time.monotonic() + 3600  # as if it had just been asked

    assert starter() is None
    assert start.calls == 0


def test_where_the_machine_cannot_be_read_the_sending_process_starts(monkeypatch):
    monkeypatch.setattr(OnASpareCore, "CHECK_SECONDS", 0.0)
    machine(monkeypatch, [None, None])
    start = FakeStart()

    assert OnASpareCore(start)() == "a sending process"
