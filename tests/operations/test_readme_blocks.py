"""The README's shell blocks marked `<!-- runs-against-demo -->`, pasted into bash against a
running demo with the variables it prints: every call exits 0 and answers the status its
comment names (tests/support/pasted.py)."""

import os
import re
import shutil
import signal

import pytest

from tests.conftest import sqlite_only
from tests.support.demo import free_port, printed_lines, running_demo
from tests.support.pasted import MARKER, Call, DemoShell, documented_calls, marked_blocks
from tests.support.processes import ROOT

# Long, because a busy machine starts the demo's six processes slowly; a passing run waits
# only as long as it must.
WAIT = 120
VARIABLE_USE = re.compile(r"\$\{?([A-Za-z_]\w*)")

pytestmark = [
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
    sqlite_only,
]


def readme_calls() -> list[Call]:
    return [call for block in marked_blocks() for call in documented_calls(block)]


def test_the_readme_says_its_marked_blocks_are_checked_and_marks_the_tour_and_the_portal():
    readme = (ROOT / "README.md").read_text()
    paths = [call.path for call in readme_calls()]

    assert "`tests/operations/test_readme_blocks.py`" in readme
    assert f"`{MARKER}`" in readme
    assert {"/v1/projects", "/v1/notifications", "/v1/applications/acme/portal-sessions"} <= set(
        paths
    )


def test_every_marked_call_names_its_status_and_uses_only_the_demos_variables():
    calls = readme_calls()

    assert all(100 <= call.status < 600 for call in calls)
    used = {name for call in calls for name in VARIABLE_USE.findall(call.command)}
    assert used <= {"TOKEN", "H", "API", "HOOK"}


def test_the_marked_blocks_run_against_the_demo(tmp_path):
    with running_demo(tmp_path, free_port()) as demo:
        demo.wait_for(r"hook \| receiving webhooks at ", timeout=WAIT)
        demo.wait_healthy(timeout=WAIT)
        assignments, _ = printed_lines(demo.output)
        shell = DemoShell(assignments, wait=WAIT)

        answers = [shell.run(call) for call in readme_calls()]

        by_path = {call.path: answer for call, answer in zip(readme_calls(), answers, strict=True)}
        assert by_path["/v1/projects"].body["status"] == "provisioning"
        assert by_path["/v1/jobs/<job id>"].body["status"] == "completed"
        assert by_path["/v1/webhook-endpoints"].body["url"] == (
            f"http://127.0.0.1:{demo.receiver_port}/hook"
        )
        assert by_path["/v1/deliveries"].body["results"] == []  # it fires on Monday
        portal = by_path["/v1/applications/acme/portal-sessions"].body
        assert portal["token"].startswith("tkp_")

        os.killpg(demo.process.pid, signal.SIGINT)
        assert demo.finish(timeout=WAIT) == 0, demo.output
    assert "hook | rejected" not in demo.output
