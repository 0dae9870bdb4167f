"""The app under a real `gunicorn -w 3` on 127.0.0.1, and requests spread over its workers.

`spread_requests` makes every worker serve some of the requests without relying on how the
kernel hands out connections: a sync worker serves one connection at a time and blocks
reading an unfinished request, so each of the first `workers - 1` requests is started and
left unfinished on its own connection, pinning one worker each; the middle requests go to
the one worker left free, then the pinned requests are finished. Every request uses a new
connection; the access log names the worker (process id) that answered each.
"""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]


@dataclass(frozen=True)
class Served:
    port: int
    workers: int
    access_log: Path

    def worker_pids(self) -> set[str]:
        return {line.split()[0] for line in self.access_log.read_text().splitlines() if line}


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return result.stdout


def app_env(database_url: str, **overrides: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-only-secret-key-not-for-production",
        "LOG_LEVEL": "WARNING",
        **overrides,
    }


@contextmanager
def gunicorn(env: dict[str, str], log_dir: Path, workers: int = 3) -> Iterator[Served]:
    # --preload: the workers fork from an app already loaded, so every one of them accepts
    # at once; on a busy machine a worker still importing Django would leave the requests
    # meant for "the one worker left free" queued past their read timeout.
    port = _free_port()
    access_log = log_dir / "access.log"
    server = subprocess.Popen(
        [
            GUNICORN, "config.wsgi:application", f"--bind=127.0.0.1:{port}",
            f"--workers={workers}", "--timeout=120", "--log-level=warning", "--preload",
            f"--access-logfile={access_log}", "--access-logformat=%(p)s %(s)s",
        ],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_healthy(server, port)
        access_log.write_text("")  # the health checks are not the test's requests
        yield Served(port=port, workers=workers, access_log=access_log)
    finally:
        server.terminate()
        server.communicate(timeout=60)


def spread_requests(served: Served, path: str, headers: dict[str, str], count: int) -> list[Answer]:
    """`count` GET requests on new connections, every worker answering some (see above)."""
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    pinned = [connect(served.port) for _ in range(served.workers - 1)]
    for connection in pinned:
        connection.sendall(head.encode())
    _wait_until_accepted(served, len(pinned))
    answers = []
    for _ in range(count - len(pinned)):
        with connect(served.port) as connection:
            connection.sendall(f"{head}\r\n".encode())
            answers.append(read_answer(connection))
    for connection in pinned:
        with connection:
            connection.sendall(b"\r\n")
            answers.append(read_answer(connection))
    return answers


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=60)


def read_answer(connection: socket.socket) -> Answer:
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:])
    return Answer(status=int(head[0].split()[1]), headers=headers)


def _wait_until_accepted(served: Served, connections: int) -> None:
    """Wait until the kernel has handed `connections` unfinished requests to workers: the
    pinned connections sit first in the listen queue, so the free worker takes the next."""
    # Accepted connections leave the listen queue; ss reports the queue's length as Recv-Q.
    deadline = time.monotonic() + 30
    while _listen_queue(served.port) > 0:
        assert time.monotonic() < deadline, f"{connections} connections never accepted"
        time.sleep(0.05)


def _listen_queue(port: int) -> int:
    lines = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(lines[1])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(server: subprocess.Popen[str], port: int) -> None:
    assert server.stderr is not None, "gunicorn is started with stderr=PIPE"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, f"gunicorn exited: {server.stderr.read()}"
        try:
            with connect(port) as connection:
                connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                if read_answer(connection).status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("gunicorn did not answer /healthz within 60 s")
