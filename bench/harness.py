"""What the benches that serve the API share: their environment and database, `manage.py`,
gunicorn on a free port, the CPU seconds a process used (from /proc) and the client threads
that drive requests at a server."""

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WORKERS = 3


def bench_env(database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.api_settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": "bench-only-secret-key",
        "THROTTLE_RATE_USER": "100000000/s",
        "THROTTLE_RATE_ANON": "100000000/s",
        # The seeded endpoint points at 127.0.0.1; no tick runs, so nothing is sent to it.
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout


def recreate_postgres_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


def drop_postgres_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], port: int, *, workers: int = WORKERS, threads: int = 1
) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            str(Path(PYTHON).parent / "gunicorn"),
            "config.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            f"--workers={workers}",
            f"--threads={threads}",
            "--log-level=warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return server
        except requests.RequestException:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not become healthy within 30 s")


def server_cpu(server: subprocess.Popen, pg_database: str | None) -> Callable[[], dict]:
    """A function giving the CPU seconds used so far by each gunicorn worker and, on
    PostgreSQL, by each of the bench database's backends, by process id: figures that other
    load on the machine does not move as it moves requests/s."""

    def pids() -> list[int]:
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        found = [int(pid) for pid in children]
        if pg_database is not None:
            import psycopg

            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s", [pg_database]
                ).fetchall()
            found += [pid for (pid,) in rows]
        return found

    def seconds() -> dict[int, float]:
        return {pid: used for pid in pids() if (used := cpu_seconds(pid)) is not None}

    return seconds


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process `pid` (all its threads) has used, from /proc; None
    once it has exited."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """The processes `pid` (any of its threads) started that still run, from /proc."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread or the process ended meanwhile
    return children


def drive(
    request_once, *, clients: int, seconds: float, cpu: Callable[[], dict]
) -> dict[str, float]:
    """Run `request_once(session)` from `clients` threads for `seconds`; returns figures."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def client() -> None:
        nonlocal errors
        session = requests.Session()
        start.wait()
        mine, bad = [], 0
        while time.perf_counter() < stop_at[0]:
            began = time.perf_counter()
            ok = request_once(session)
            mine.append(time.perf_counter() - began)
            bad += not ok
        with lock:
            latencies.extend(mine)
            errors += bad

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    stop_at.append(time.perf_counter() + seconds)
    cpu_before = cpu()
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    # A process that started meanwhile (a database connection past CONN_MAX_AGE is
    # replaced) counts whole; one that ended takes its last figures with it.
    cpu_used = sum(used - cpu_before.get(pid, 0.0) for pid, used in cpu().items())
    return _figures(latencies, errors=errors, elapsed=elapsed, cpu_used=cpu_used)


def _figures(
    latencies: list[float], *, errors: int, elapsed: float, cpu_used: float
) -> dict[str, float]:
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": quantiles[49] * 1000,
        "p99_ms": quantiles[98] * 1000,
        "cpu_ms": cpu_used * 1000 / max(1, len(latencies)),
    }
