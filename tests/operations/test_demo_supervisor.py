"""The process supervisor behind `manage.py demo`, and the demo end to end: a real launcher
with its server and both workers on a SQLite file of its own (migrated already), stopped by
Ctrl-C or SIGTERM."""

import io
import os
import signal
import socket
import sys
import textwrap
import threading
import time

import pytest

from operations.demo.supervisor import PortUnavailable, ProcessSpec, Supervisor, port_check
from tests.conftest import sqlite_only
from tests.support.demo import Demo, free_port, gone, running_demo, started_pids


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# Exits 0 on SIGTERM after saying so; prints a noise line the tests hide.
# How long to wait for a line, a health check or an exit before failing: long, because a
# busy machine starts the demo's six processes slowly; a passing run waits only as long as
# it must.
WAIT = 120

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


def assert_clean_stop(demo: Demo, pids: dict[str, int]) -> None:
    assert demo.finish(timeout=WAIT) == 0, demo.output
    assert set(pids) == {"web", "tick", "jobs", "hook", "turn", "page"}
    assert [name for name, pid in pids.items() if not gone(pid)] == []
    assert "Traceback" not in demo.output
    assert "KeyboardInterrupt" not in demo.output
    assert "demo | stopping web, tick, jobs, hook, turn, page" in demo.output
    assert "still running at the deadline" not in demo.output  # each stopped on its SIGTERM
    assert demo.output.endswith("demo | stopped\n")


@sqlite_only  # the demo runs on a SQLite file of its own
@pytest.mark.usefixtures("demo_database")
def test_demo_runs_a_project_through_its_job_and_invitation_then_stops_on_ctrl_c(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        token = demo.wait_for(r"API token \(shown once\): (\S+)", timeout=WAIT)[1]
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=WAIT)[0])
        demo.wait_healthy(timeout=WAIT)

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
        demo.wait_for(r"tick \| Subject: You are invited to the team \"Demo\"", timeout=WAIT)
        demo.wait_for(r"tick \| event=run_tick claimed=1 delivered=1 ", timeout=WAIT)

        os.killpg(demo.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does

        assert_clean_stop(demo, pids)
    assert "tick | To: teammate@example.com\n" in demo.output
    assert "tick | To: demo@example.com\n" not in demo.output  # the creator is not "invited"
    assert "event=run_tick claimed=0 " not in demo.output  # idle ticks are not shown


@sqlite_only  # the demo runs on a SQLite file of its own
@pytest.mark.usefixtures("demo_database")
def test_sigterm_to_the_launcher_alone_stops_every_process(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=WAIT)[0])
        demo.wait_healthy(timeout=WAIT)

        demo.process.send_signal(signal.SIGTERM)

        assert_clean_stop(demo, pids)


@sqlite_only  # the demo runs on a SQLite file of its own
@pytest.mark.usefixtures("demo_database")
def test_the_demo_receiver_prints_each_verified_webhook_delivery(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        token = demo.wait_for(r"API token \(shown once\): (\S+)", timeout=WAIT)[1]
        receiver_line = r"Webhook receiver: (http://127\.0\.0\.1:\d+/hook)"
        hook_url = demo.wait_for(receiver_line, timeout=WAIT)[1]
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=WAIT)[0])
        demo.wait_for(r"hook \| receiving webhooks at ", timeout=WAIT)
        demo.wait_healthy(timeout=WAIT)

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
            timeout=WAIT,
        )

        os.killpg(demo.process.pid, signal.SIGINT)

        assert_clean_stop(demo, pids)
    assert "hook | rejected" not in demo.output


@sqlite_only  # the demo runs on a SQLite file of its own
@pytest.mark.usefixtures("demo_database")
def test_the_children_die_with_a_sigkilled_launcher_and_free_the_port(tmp_path):
    port = free_port()
    with running_demo(tmp_path, port) as demo:
        pids = started_pids(demo.wait_for(r"demo \| started .*", timeout=WAIT)[0])
        demo.wait_healthy(timeout=WAIT)

        demo.process.kill()  # the launcher alone: its children lead their own sessions
        demo.process.wait(timeout=10)

        deadline = time.monotonic() + WAIT
        while alive := [name for name, pid in pids.items() if not gone(pid)]:
            assert time.monotonic() < deadline, f"still running: {alive}"
            time.sleep(0.1)
    assert set(pids) == {"web", "tick", "jobs", "hook", "turn", "page"}
    port_check("127.0.0.1", port)


@sqlite_only  # the demo runs on a SQLite file of its own
def test_a_port_in_use_is_a_clear_error_before_anything_starts(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with running_demo(tmp_path, port) as demo:
            returncode = demo.finish(timeout=WAIT)

    assert returncode == 1
    assert f"port {port} on 127.0.0.1 is not available: already in use" in demo.output
    assert "API token" not in demo.output
    assert not (tmp_path / "demo.sqlite3").exists()
