"""The process supervisor behind `manage.py demo`, and the demo end to end: a real launcher
with its server and both workers on a fresh SQLite file, stopped by Ctrl-C or SIGTERM."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from operations.supervisor import PortUnavailable, ProcessSpec, Supervisor, port_check

ROOT = Path(__file__).resolve().parents[2]
STARTED = re.compile(r"\| started (.*); Ctrl-C")


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# Exits 0 on SIGTERM after saying so; prints a noise line the tests hide.
POLITE = python(
    """
    import signal, sys, time
    def bye(*_):
        print("got SIGTERM", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    print("noise", flush=True)
    print("ready", flush=True)
    time.sleep(60)
    """
)
STUBBORN = python(
    """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
    """
)
CRASHING = python(
    """
    import sys, time
    time.sleep(0.5)
    print("boom", flush=True)
    sys.exit(3)
    """
)


def started_pids(output: str) -> dict[str, int]:
    [listing] = STARTED.findall(output)
    return {name: int(pid) for name, pid in re.findall(r"(\w+) \(pid (\d+)\)", listing)}


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for a reaper that is not us counts)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def stop_later(supervisor: Supervisor, *delays: float) -> None:
    for delay in delays:
        threading.Timer(delay, supervisor.stop).start()


def test_a_child_that_dies_stops_the_others_and_is_named():
    out = io.StringIO()
    supervisor = Supervisor(
        [ProcessSpec("polite", POLITE), ProcessSpec("crash", CRASHING)], out=out, label="test"
    )

    ending = supervisor.run()

    output = out.getvalue()
    assert (ending.died, ending.returncode, ending.exit_code) == ("crash", 3, 1)
    assert ending.killed == ()
    assert output.endswith("test   | stopped\n")
    assert "crash  | boom\n" in output
    assert "test   | crash exited unexpectedly (exit code 3)\n" in output
    assert "polite | got SIGTERM\n" in output
    assert all(gone(pid) for pid in started_pids(output).values())


def test_a_requested_stop_sends_one_sigterm_and_ends_with_exit_code_0():
    out = io.StringIO()
    supervisor = Supervisor(
        [ProcessSpec("a", POLITE, hide=lambda line: line == "noise"), ProcessSpec("b", POLITE)],
        out=out,
        label="test",
    )
    stop_later(supervisor, 1.0)

    ending = supervisor.run()

    output = out.getvalue()
    assert (ending.died, ending.exit_code, ending.killed) == (None, 0, ())
    assert output.count("got SIGTERM") == 2
    assert "a    | noise" not in output
    assert "b    | noise\n" in output
    assert "a    | ready\n" in output
    assert all(gone(pid) for pid in started_pids(output).values())


def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period():
    out = io.StringIO()
    supervisor = Supervisor(
        [ProcessSpec("stubborn", STUBBORN), ProcessSpec("polite", POLITE)],
        out=out,
        label="test",
        grace=0.5,
    )
    stop_later(supervisor, 1.0)

    ending = supervisor.run()

    output = out.getvalue()
    assert (ending.exit_code, ending.killed) == (0, ("stubborn",))
    assert "killed stubborn: still running at the deadline" in output
    assert all(gone(pid) for pid in started_pids(output).values())


def test_a_second_stop_request_kills_without_waiting_for_the_grace_period():
    out = io.StringIO()
    supervisor = Supervisor([ProcessSpec("stubborn", STUBBORN)], out=out, grace=60)
    stop_later(supervisor, 1.0, 1.5)
    started = time.monotonic()

    ending = supervisor.run()

    assert ending.killed == ("stubborn",)
    assert time.monotonic() - started < 30  # far below the 60 s grace period
    assert all(gone(pid) for pid in started_pids(out.getvalue()).values())


def test_port_check_refuses_a_port_someone_listens_on():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(PortUnavailable, match=f"port {port} on 127.0.0.1 .* in use"):
            port_check("127.0.0.1", port)
    port_check("127.0.0.1", port)  # free again once closed


# --- manage.py demo, end to end ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Demo:
    """A `manage.py demo` launcher in its own process group, its output collected."""

    def __init__(
        self,
        tmp_path: Path,
        port: int,
        *,
        receiver_port: int | None = None,
        env: dict | None = None,
    ) -> None:
        self.port = port
        # Not the default ports: demos of other test runs on this machine may hold them.
        self.receiver_port = receiver_port or free_port()
        self.frontend_port = free_port()
        env = {
            **os.environ,
            "DEBUG": "true",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
            # Whatever a developer's environment or .env says, this run uses the defaults.
            "PROVISIONING_URL": "",
            "RESEND_API_KEY": "",
            "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend",
            **(env or {}),
        }
        self.process = subprocess.Popen(
            [
                *(sys.executable, "manage.py", "demo", "--port", str(port)),
                *("--receiver-port", str(self.receiver_port)),
                *("--frontend-port", str(self.frontend_port)),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def wait_for(self, pattern: str, *, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output)) is None:
            assert self.process.poll() is None, f"demo exited early:\n{self.output}"
            assert time.monotonic() < deadline, f"no {pattern!r} in:\n{self.output}"
            time.sleep(0.1)
        return found

    def request(self, path: str, *, token: str = "", body: dict | None = None) -> tuple:
        """(status, JSON answer) of a GET, or of a POST of `body`."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers |= {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, headers=headers
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())

    def wait_healthy(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"demo exited early:\n{self.output}"
            try:
                if self.request("/healthz")[0] == 200:
                    return
            except OSError:
                assert time.monotonic() < deadline, f"/healthz never answered:\n{self.output}"
                time.sleep(0.2)

    def finish(self, *, timeout: float) -> int:
        returncode = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        if STARTED.search(self.output):
            for pid in started_pids(self.output).values():
                if not gone(pid):
                    os.killpg(pid, signal.SIGKILL)
        self.process.wait()


@contextmanager
def running_demo(
    tmp_path: Path, port: int, *, receiver_port: int | None = None, env: dict | None = None
) -> Iterator[Demo]:
    demo = Demo(tmp_path, port, receiver_port=receiver_port, env=env)
    try:
        yield demo
    finally:
        demo.kill()  # a failed assertion must not leave servers behind


def assert_clean_stop(demo: Demo, pids: dict[str, int]) -> None:
    assert demo.finish(timeout=30) == 0, demo.output
    assert set(pids) == {"web", "tick", "jobs", "hook", "turn", "page"}
    assert [name for name, pid in pids.items() if not gone(pid)] == []
    assert "Traceback" not in demo.output
    assert "KeyboardInterrupt" not in demo.output
    assert "demo | stopping web, tick, jobs, hook, turn, page" in demo.output
    assert "still running at the deadline" not in demo.output  # each stopped on its SIGTERM
    assert demo.output.endswith("demo | stopped\n")


def test_demo_runs_a_project_through_its_job_and_invitation_then_stops_on_ctrl_c(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        token = demo.wait_for(r"API token \(shown once\): (\S+)", timeout=30)[1]
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=30)[0])
        demo.wait_healthy(timeout=20)

        body = {"name": "Relaunch", "invite": ["teammate@example.com"]}
        status, created = demo.request("/v1/projects", token=token, body=body)
        assert (status, created["status"]) == (202, "provisioning")

        def project() -> dict:
            return demo.request(f"/v1/projects/{created['id']}", token=token)[1]

        deadline = time.monotonic() + 15
        while (current := project())["status"] != "active":
            assert time.monotonic() < deadline, current
            time.sleep(0.2)
        assert current["job"] == {"id": created["job"]["id"], "status": "completed"}
        demo.wait_for(r"tick \| Subject: You are invited to the team \"Demo\"", timeout=15)
        demo.wait_for(r"tick \| event=run_tick claimed=1 delivered=1 ", timeout=5)

        os.killpg(demo.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does

        assert_clean_stop(demo, pids)
    assert "tick | To: teammate@example.com\n" in demo.output
    assert "tick | To: demo@example.com\n" not in demo.output  # the creator is not "invited"
    assert "event=run_tick claimed=0 " not in demo.output  # idle ticks are not shown


def test_sigterm_to_the_launcher_alone_stops_every_process(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=30)[0])
        demo.wait_healthy(timeout=20)

        demo.process.send_signal(signal.SIGTERM)

        assert_clean_stop(demo, pids)


def test_the_demo_receiver_prints_each_verified_webhook_delivery(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        token = demo.wait_for(r"API token \(shown once\): (\S+)", timeout=30)[1]
        hook_url = demo.wait_for(r"Webhook receiver: (http://127\.0\.0\.1:\d+/hook)", timeout=5)[1]
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=30)[0])
        demo.wait_for(r"hook \| receiving webhooks at ", timeout=20)
        demo.wait_healthy(timeout=20)

        status, endpoint = demo.request(
            "/v1/webhook-endpoints", token=token, body={"url": hook_url}
        )
        assert status == 201, endpoint
        status, notification = demo.request(
            "/v1/notifications",
            token=token,
            body={
                "channels": ["webhook"],
                "webhook_endpoint": endpoint["id"],
                "subject": "Hello",
                "body": "From the test",
            },
        )
        assert status == 201, notification
        demo.wait_for(
            rf"hook \| verified webhook-id=notification_{notification['id']}_1 "
            r"type=notification\.fired subject=\"Hello\"\n",
            timeout=20,
        )

        os.killpg(demo.process.pid, signal.SIGINT)

        assert_clean_stop(demo, pids)
    assert "hook | rejected" not in demo.output


def test_the_children_die_with_a_sigkilled_launcher_and_free_the_port(tmp_path):
    port = free_port()
    with running_demo(tmp_path, port) as demo:
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=30)[0])
        demo.wait_healthy(timeout=20)

        demo.process.kill()  # the launcher alone: its children lead their own sessions
        demo.process.wait(timeout=10)

        deadline = time.monotonic() + 30
        while alive := [name for name, pid in pids.items() if not gone(pid)]:
            assert time.monotonic() < deadline, f"still running: {alive}"
            time.sleep(0.1)
    assert set(pids) == {"web", "tick", "jobs", "hook", "turn", "page"}
    port_check("127.0.0.1", port)


def test_a_port_in_use_is_a_clear_error_before_anything_starts(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with running_demo(tmp_path, port) as demo:
            returncode = demo.finish(timeout=30)

    assert returncode == 1
    assert f"port {port} on 127.0.0.1 is not available: already in use" in demo.output
    assert "API token" not in demo.output
    assert not (tmp_path / "demo.sqlite3").exists()
