"""`manage.py demo` run for real by the tests: a launcher in its own process group on a
SQLite file of its own, its output collected, and a free port to give it."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.pasted import shell_commands
from tests.support.processes import ROOT

DATABASE = "demo.sqlite3"
STARTED = re.compile(r"\| started (.*); Ctrl-C")


def started_pids(output: str) -> dict[str, int]:
    [listing] = STARTED.findall(output)
    return {name: int(pid) for name, pid in re.findall(r"(\w+) \(pid (\d+)\)", listing)}


def printed_lines(output: str) -> tuple[list[str], list[str]]:
    """The demo's paste-ready lines: its variable assignments, then its calls."""
    after = output[output.index("Try it: paste these lines into bash") :].splitlines()[1:]
    block = "\n".join(line[2:] for line in after if line.startswith("  "))
    commands = shell_commands(block)
    assignments = [command for command in commands if re.match(r"[A-Z]+=", command)]
    return assignments, [command for command in commands if command not in assignments]


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for a reaper that is not us counts)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


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
            "DATABASE_URL": f"sqlite:///{tmp_path / DATABASE}",
            # Whatever a developer's environment or .env says, this run uses the defaults.
            "PROVISIONING_URL": "",
            "RESEND_API_KEY": "",
            "EMAIL_BACKEND": "operations.console_email.ReadableConsoleBackend",
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
