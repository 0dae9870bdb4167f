"""consume_jobs --loop as a real process: SIGTERM lets the job in flight finish, then the
worker exits 0."""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs.models import Job
from tenancy.services import tenant_create
from tests.jobs.factories import make_job
from tests.support.http_server import Reply, recording_server
from tests.support.sqlite_files import copy_of

ROOT = Path(__file__).resolve().parents[2]
SEED = (
    "from django.utils import timezone; from tenancy.services import tenant_create; "
    "from tests.jobs.factories import make_job; "
    "print(make_job(tenant_create(name='T', owner_email='o@example.com').tenant, "
    "now=timezone.now()).id)"
)


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def prepared_database(request, tmp_path: Path) -> tuple[dict[str, str], str, object]:
    """An environment whose database the worker process can see, with one ready job; returns
    (env, job id, a function reading the job's status). On SQLite: a copy of the migrated
    file (tests/support/sqlite_files.py)."""
    env = {**os.environ, "JOB_LEASE_SECONDS": "60"}
    if connection.vendor == "postgresql":
        db = settings.DATABASES["default"]
        env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        tenant = tenant_create(name="T", owner_email="o@example.com").tenant
        job_id = str(make_job(tenant, now=timezone.now()).id)
        return env, job_id, lambda: Job.objects.get(pk=job_id).status
    path = copy_of(request.getfixturevalue("migrated_sqlite"), tmp_path / "worker.sqlite3")
    env["DATABASE_URL"] = f"sqlite:///{path}"
    job_id = manage("shell", "-c", SEED, env=env).stdout.strip().splitlines()[-1]

    def status() -> str:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT status FROM jobs_job").fetchone()[0]

    return env, job_id, status


@pytest.mark.django_db(transaction=True)
def test_sigterm_finishes_the_job_in_flight_then_exits_0(request, tmp_path):
    env, job_id, job_status = prepared_database(request, tmp_path)
    in_flight = threading.Event()

    def slow_provisioning(request):
        in_flight.set()
        return Reply(200, delay=1.0)

    with recording_server(slow_provisioning) as server:
        env["PROVISIONING_URL"] = server.url
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "consume_jobs", "--loop", "--interval", "0.2"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert in_flight.wait(60), worker.stderr.read() if worker.poll() else "no request"
            worker.send_signal(signal.SIGTERM)
            stdout, stderr = worker.communicate(timeout=60)
        finally:
            if worker.poll() is None:
                worker.kill()
        received = server.received()

    assert worker.returncode == 0, stderr
    assert (
        "event=consume_jobs claimed=1 completed=1 backed_off=0 deferred=0 dead_lettered=0 "
        "fenced_out=0" in stdout
    )
    assert [r.headers["idempotency-key"] for r in received] == [job_id]
    assert job_status() == "completed"
