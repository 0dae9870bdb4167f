"""What `manage.py demo` prints and the README's quick tour, pasted into bash as a newcomer
would on a fresh Debian: the same variables, an Idempotency-Key on every POST made by a
command every such machine has, and calls that work against the running demo. And the
demo's webhook receiver, which keeps its URL from one run to the next."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sqlite_only
from tests.support.demo import DATABASE, Demo, free_port, printed_lines, running_demo
from tests.support.pasted import marked_blocks, shell_commands
from tests.support.processes import ROOT

KEY_HEADER = re.compile(r'-H "Idempotency-Key: (\$\([^"]*\))"')
VARIABLE_USE = re.compile(r"\$\{?([A-Za-z_]\w*)")
PLACEHOLDER = re.compile(r"<[a-z ]+>")
PUBLIC_POST = re.compile(r'"\$API/v1/(signup|signup/verify|invitations/accept)"')
EMAILED_TOKEN = r"tick \| \S*/{page}\?token=([A-Za-z0-9_-]+)"
# How long to wait for a line, a health check or an exit before failing: long, because a
# busy machine starts the demo's six processes slowly; a passing run waits only as long as it must.
WAIT = 120

# The demo runs on a SQLite file of its own.
pytestmark = [
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
    sqlite_only,
]


def readme_calls() -> list[str]:
    return [call for block in marked_blocks() for call in shell_commands(block)]


def demo_set_up(tmp_path: Path, *extra: str) -> str:
    env = {**os.environ, "DEBUG": "true", "DATABASE_URL": f"sqlite:///{tmp_path / DATABASE}"}
    result = subprocess.run(
        [sys.executable, "manage.py", "demo", "--no-serve", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def defined(assignments: list[str]) -> set[str]:
    return {command.partition("=")[0] for command in assignments}


@pytest.mark.usefixtures("demo_database")
def test_every_post_sends_an_idempotency_key_made_by_python3_never_uuidgen(tmp_path):
    _, demo_calls = printed_lines(demo_set_up(tmp_path))

    for calls in (demo_calls, readme_calls()):
        posts = [call for call in calls if "-X POST" in call]
        paths = {re.search(r'"\$API(/v1/[a-z/-]+)"', post)[1] for post in posts}
        assert {"/v1/projects", "/v1/webhook-endpoints", "/v1/notifications"} <= paths
        # The public front-door routes take no Idempotency-Key (keys are a tenant's).
        for post in [post for post in posts if not PUBLIC_POST.search(post)]:
            [generator] = KEY_HEADER.findall(post)
            assert generator == "$(python3 -c 'import uuid; print(uuid.uuid4())')"
        assert not any("uuidgen" in call for call in calls)


def test_the_key_is_fresh_each_time_a_pasted_line_runs(tmp_path):
    [generator] = set(KEY_HEADER.findall("".join(readme_calls())))

    keys = [
        subprocess.run(
            ["bash", "-c", f'echo "{generator}"'], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]

    assert keys[0] != keys[1]
    assert all(uuid.UUID(key) for key in keys)


@pytest.mark.usefixtures("demo_database")
def test_the_calls_use_only_the_variables_the_demo_prints(tmp_path):
    assignments, demo_calls = printed_lines(demo_set_up(tmp_path))

    assert defined(assignments) == {"TOKEN", "H", "API", "HOOK"}
    for calls in (demo_calls, readme_calls()):
        used = {name for call in calls for name in VARIABLE_USE.findall(call)}
        assert used == {"H", "API", "HOOK"}
    assert 'H="Authorization: Bearer $TOKEN"' in assignments[1]


@pytest.mark.usefixtures("demo_database")
def test_the_receiver_url_is_the_same_every_run(tmp_path):
    first, second = demo_set_up(tmp_path), demo_set_up(tmp_path)

    for output in (first, second):
        assert "Webhook receiver: http://127.0.0.1:8001/hook " in output
        assert "  HOOK=http://127.0.0.1:8001/hook\n" in output


class Paste:
    """Runs pasted commands one by one in bash after the demo's variable lines, filling in
    each <…> from the earlier answers as a reader would."""

    def __init__(self, assignments: list[str]) -> None:
        self.preamble = "set -eu\n" + "".join(assignments)
        self.values: dict[str, str] = {}

    def run(self, command: str) -> Any:
        filled = PLACEHOLDER.sub(lambda found: self.values[found[0]], command)
        result = subprocess.run(
            ["bash", "-c", self.preamble + filled], capture_output=True, text=True, timeout=WAIT
        )
        assert result.returncode == 0, (filled, result.stderr)
        answer = json.loads(result.stdout)
        assert "status" not in answer or not isinstance(answer["status"], int), answer
        self._remember(answer)
        return answer

    def _remember(self, answer: object) -> None:
        if not isinstance(answer, dict):
            return
        if "job" in answer:
            self.values["<job id>"] = answer["job"]["id"]
        if "secret" in answer:
            self.values["<endpoint id>"] = answer["id"]
        if "webhook_endpoint" in answer:
            self.values["<notification id>"] = answer["id"]


def test_the_printed_lines_run_against_the_demo(tmp_path):
    """The README's calls run in test_readme_blocks.py."""
    with running_demo(tmp_path, free_port()) as demo:
        demo.wait_for(r"hook \| receiving webhooks at ", timeout=WAIT)
        demo.wait_healthy(timeout=WAIT)
        assignments, demo_calls = printed_lines(demo.output)
        paste = Paste(assignments)

        answers = [paste.run(call) for call in demo_calls[:5]]

        project, job, projects, endpoint, notification = answers
        assert project["status"] == "provisioning"
        assert job["id"] == project["job"]["id"]
        assert [item["id"] for item in projects["results"]] == [project["id"]]
        assert endpoint["url"] == f"http://127.0.0.1:{demo.receiver_port}/hook"
        demo.wait_for(
            rf"hook \| verified webhook-id=notification_{notification['id']}_1 ", timeout=WAIT
        )

        run_the_front_door(demo, paste, demo_calls[5:])

        os.killpg(demo.process.pid, signal.SIGINT)
        assert demo.finish(timeout=WAIT) == 0, demo.output
    assert "hook | rejected" not in demo.output


def run_the_front_door(demo: Demo, paste: Paste, calls: list[str]) -> None:
    """Signup → verify → invite → accept as printed, each token read from the email the
    console backend printed under `tick |`, as a reader would copy it."""
    signup, verify, invite, accept = calls

    assert paste.run(signup) == {"status": "verification_sent"}
    found = demo.wait_for(EMAILED_TOKEN.format(page="signup/verify"), timeout=WAIT)
    paste.values["<verification token>"] = found[1]
    team = paste.run(verify)
    assert team["user_email"] == "founder@example.com" and team["token"].startswith("tkw_")
    assert paste.run(invite)["status"] == "pending"
    found = demo.wait_for(EMAILED_TOKEN.format(page="invitations/accept"), timeout=WAIT)
    paste.values["<invitation token>"] = found[1]
    joined = paste.run(accept)
    assert (joined["user_email"], joined["role"]) == ("teammate@example.com", "member")


def start_and_stop(demo: Demo, then=lambda: None) -> None:
    demo.wait_for(r"hook \| receiving webhooks at ", timeout=WAIT)
    demo.wait_healthy(timeout=WAIT)
    then()
    os.killpg(demo.process.pid, signal.SIGINT)
    assert demo.finish(timeout=WAIT) == 0, demo.output


def test_a_second_run_on_the_same_database_delivers_to_an_endpoint_of_the_first(tmp_path):
    receiver_port, created = free_port(), {}
    with running_demo(tmp_path, free_port(), receiver_port=receiver_port) as first:
        token = first.wait_for(r"API token \(shown once\): (\S+)", timeout=WAIT)[1]
        hook_url = first.wait_for(r"  HOOK=(\S+)\n", timeout=WAIT)[1]

        def create_endpoint() -> None:
            status, created["endpoint"] = first.request(
                "/v1/webhook-endpoints", token=token, body={"url": hook_url}
            )
            assert status == 201

        start_and_stop(first, create_endpoint)

    with running_demo(tmp_path, free_port(), receiver_port=receiver_port) as second:
        token = second.wait_for(r"API token \(shown once\): (\S+)", timeout=WAIT)[1]
        assert second.wait_for(r"  HOOK=(\S+)\n", timeout=WAIT)[1] == hook_url

        def notify_the_old_endpoint() -> None:
            status, notification = second.request(
                "/v1/notifications",
                token=token,
                body={
                    "channels": ["webhook"],
                    "webhook_endpoint": created["endpoint"]["id"],
                    "subject": "Again",
                    "body": "",
                },
            )
            assert status == 201, notification
            second.wait_for(
                rf"hook \| verified webhook-id=notification_{notification['id']}_1 ", timeout=WAIT
            )

        start_and_stop(second, notify_the_old_endpoint)
    assert "hook | rejected" not in second.output


@pytest.mark.usefixtures("demo_database")
def test_a_taken_receiver_port_falls_back_to_a_free_one_and_says_so(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        with running_demo(tmp_path, free_port(), receiver_port=taken) as demo:
            fallback = int(
                demo.wait_for(r"  HOOK=http://127\.0\.0\.1:(\d+)/hook\n", timeout=WAIT)[1]
            )
            start_and_stop(demo)

    assert fallback != taken
    assert (
        f"Webhook receiver: http://127.0.0.1:{fallback}/hook (prints each verified delivery)\n"
        f"  port {taken} on 127.0.0.1 is not available: already in use, so the receiver "
        f"listens on port {fallback} this run: endpoints created for "
        f"http://127.0.0.1:{taken}/hook will not reach it" in demo.output
    )
    assert f"hook | receiving webhooks at http://127.0.0.1:{fallback}/hook\n" in demo.output


def test_a_receiver_port_out_of_range_is_refused(tmp_path):
    env = {**os.environ, "DEBUG": "true", "DATABASE_URL": f"sqlite:///{tmp_path / 'd.db'}"}

    result = subprocess.run(
        [sys.executable, "manage.py", "demo", "--receiver-port", "70000"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )

    assert result.returncode == 1
    assert "--receiver-port must be between 1 and 65535, got 70000" in result.stderr
    assert not (tmp_path / "d.db").exists()
