"""`manage.py demo`: set up a local SQLite install with a demo tenant and run every process.

Migrates, creates (or reuses) the demo tenant and its owner, prints a fresh token and curl
examples, then runs the web server, `run_tick --loop` and `consume_jobs --loop` until
Ctrl-C. `--no-serve` stops after the set-up (used by the tests and by scripts).
"""

import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from tenancy.services import demo_setup

WORKERS = (
    ["run_tick", "--loop", "--interval", "10"],
    ["consume_jobs", "--loop"],
)


class Command(BaseCommand):
    help = "Set up a demo tenant on the configured database and run the whole product locally."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="Set up and exit.")

    def handle(self, *args: Any, port: int, no_serve: bool, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("demo is for local development: run it with DEBUG=true")
        call_command("migrate", verbosity=0, interactive=False)
        demo = demo_setup()
        base = f"http://127.0.0.1:{port}"
        auth = f"-H 'Authorization: Bearer {demo.grant.token}'"
        self.stdout.write(
            f"Demo tenant {demo.grant.tenant.name} ({demo.grant.tenant.id}), "
            f"owner {demo.grant.user.email}\n"
            f"API token (shown once): {demo.grant.token}\n"
            f"Admin: {base}/admin/  user {demo.admin_username}  password {demo.admin_password}\n\n"
            "Try it:\n"
            f"  curl -s -X POST {base}/v1/projects {auth} \\\n"
            "       -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\\n"
            '       -d \'{"name": "Website relaunch"}\'\n'
            f"  curl -s {base}/v1/projects {auth}\n"
            f"  API docs: {base}/v1/docs\n"
        )
        if not no_serve:
            self._serve(port)

    def _serve(self, port: int) -> None:
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        # Fixed argument lists built from our own constants: no shell, no outside input.
        workers = [subprocess.Popen([*manage, *worker]) for worker in WORKERS]  # noqa: S603
        try:
            server = [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"]
            subprocess.run(server, check=False)  # noqa: S603
        except KeyboardInterrupt:
            pass
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=30)
