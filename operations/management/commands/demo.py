"""`manage.py demo`: set up a local install with a demo tenant and run every process.

Migrates, creates (or reuses) the demo tenant and its owner, prints a fresh token and curl
examples, then runs the development server, `run_tick --loop` and `consume_jobs --loop`
under operations.supervisor until Ctrl-C (or SIGTERM). `--no-serve` stops after the set-up.
"""

import os
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.supervisor import (
    PortUnavailable,
    ProcessSpec,
    Supervisor,
    describe_returncode,
    port_check,
)
from tenancy.services import demo_setup

HOST = "127.0.0.1"
# A notification due now goes out within this many seconds (cron's minute is too slow to
# watch an invitation arrive).
TICK_INTERVAL_SECONDS = 2
CONSOLE_EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"


class Command(BaseCommand):
    help = "Set up a demo tenant on the configured database and run the whole product locally."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="Set up and exit.")

    def handle(self, *args: Any, port: int, no_serve: bool, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("demo is for local development: run it with DEBUG=true")
        if not no_serve:
            _check_port(port)
        try:
            call_command("migrate", verbosity=0, interactive=False)
            demo = demo_setup()
        except KeyboardInterrupt:
            raise CommandError("interrupted during the set-up", returncode=130) from None
        base = f"http://{HOST}:{port}"
        auth = f"-H 'Authorization: Bearer {demo.grant.token}'"
        self.stdout.write(
            f"Demo tenant {demo.grant.tenant.name} ({demo.grant.tenant.id}), "
            f"owner {demo.grant.user.email}\n"
            f"API token (shown once): {demo.grant.token}\n"
            f"Admin: {base}/admin/  user {demo.admin_username}  password {demo.admin_password}\n"
            f"{_side_effects()}\n\n"
            "Try it:\n"
            f"  curl -s -X POST {base}/v1/projects {auth} \\\n"
            "       -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\\n"
            '       -d \'{"name": "Website relaunch"}\'\n'
            f"  curl -s {base}/v1/projects {auth}\n"
            f"  API docs: {base}/v1/docs\n"
        )
        if no_serve:
            return
        supervisor = Supervisor(
            _processes(port),
            out=self.stdout,
            # Unbuffered, so each line shows up when it is written, not a block later.
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            label="demo",
        )
        ending = supervisor.run()
        if ending.died is not None:
            assert ending.returncode is not None
            raise CommandError(
                f"{ending.died} exited unexpectedly ({describe_returncode(ending.returncode)}); "
                "the other processes were stopped",
                returncode=ending.exit_code,
            )


def _check_port(port: int) -> None:
    if not 0 < port < 65536:
        raise CommandError(f"--port must be between 1 and 65535, got {port}")
    try:
        port_check(HOST, port)
    except PortUnavailable as exc:
        raise CommandError(f"{exc}: stop what is using it or pick another --port") from None


def _processes(port: int) -> list[ProcessSpec]:
    manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
    return [
        ProcessSpec("web", [*manage, "runserver", f"{HOST}:{port}", "--noreload"]),
        ProcessSpec(
            "tick",
            [*manage, "run_tick", "--loop", "--interval", str(TICK_INTERVAL_SECONDS)],
            hide=_idle_tick,
        ),
        ProcessSpec("jobs", [*manage, "consume_jobs", "--loop", "--interval", "1"]),
    ]


def _idle_tick(line: str) -> bool:
    """A tick summary with nothing to report: one every two seconds would bury the token
    and the examples above."""
    fields = dict(part.partition("=")[::2] for part in line.split())
    return fields.get("event") == "run_tick" and all(
        value == "0" for key, value in fields.items() if key not in ("event", "duration_s")
    )


def _side_effects() -> str:
    """Where a new project's provisioning call and its invitation e-mail go."""
    if settings.PROVISIONING_URL:
        provisioning = f"provisioning calls {settings.PROVISIONING_URL}"
    else:
        provisioning = "no PROVISIONING_URL, so a new project is provisioned at once"
    if settings.RESEND_API_KEY:
        email = "e-mail is sent through Resend"
    elif settings.EMAIL_BACKEND == CONSOLE_EMAIL_BACKEND:
        email = "e-mail is printed below (tick |)"
    else:
        email = f"e-mail goes through {settings.EMAIL_BACKEND}"
    return f"Jobs: {provisioning}; {email}."
