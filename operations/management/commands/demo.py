"""`manage.py demo`: set up a local install with a demo tenant and run every process.

Migrates, creates (or reuses) the demo tenant and its owner, prints a fresh token and curl
examples, then runs the development server, `run_tick --loop`, `consume_jobs --loop` and a
local webhook receiver (`demo_receiver`) under operations.supervisor until Ctrl-C (or
SIGTERM). Only these children may deliver webhooks to private addresses such as 127.0.0.1
(WEBHOOK_ALLOW_PRIVATE_TARGETS); the setting stays off everywhere else. `--no-serve` stops
after the set-up.
"""

import os
import sys
import uuid
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.supervisor import (
    PortUnavailable,
    ProcessSpec,
    Supervisor,
    describe_returncode,
    free_port,
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
        hook_port = free_port(HOST)
        base = f"http://{HOST}:{port}"
        self.stdout.write(
            f"Demo tenant {demo.grant.tenant.name} ({demo.grant.tenant.id}), "
            f"owner {demo.grant.user.email}\n"
            f"API token (shown once): {demo.grant.token}\n"
            f"Admin: {base}/admin/  user {demo.admin_username}  password {demo.admin_password}\n"
            f"Webhook receiver: http://{HOST}:{hook_port}/hook (prints each verified delivery)\n"
            f"{_side_effects()}\n\n"
            + _examples(base, token=demo.grant.token, hook_url=f"http://{HOST}:{hook_port}/hook")
        )
        if no_serve:
            return
        supervisor = Supervisor(
            _processes(port, hook_port),
            out=self.stdout,
            # Unbuffered, so each line shows up when it is written, not a block later.
            env={**os.environ, "PYTHONUNBUFFERED": "1", "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"},
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


def _examples(base: str, *, token: str, hook_url: str) -> str:
    """curl commands for the first API calls; each Idempotency-Key is fresh on every run, so
    a second run creates a project and a notification instead of replaying the first run's
    answers."""
    auth = '-H "Authorization: Bearer $TOKEN"'
    post = f"curl -s {auth} -H 'Content-Type: application/json'"
    return (
        "Try it:\n"
        f"  TOKEN={token}\n"
        f"  {post} -H 'Idempotency-Key: {uuid.uuid4()}' \\\n"
        f'       -X POST {base}/v1/projects -d \'{{"name": "Website relaunch"}}\'\n'
        "  # poll the job named in the answer until its status is completed:\n"
        f"  curl -s {auth} {base}/v1/jobs/<job id>\n"
        f"  curl -s {auth} {base}/v1/projects\n"
        "  # a webhook endpoint at the demo's receiver (the answer shows its secret once):\n"
        f'  {post} -X POST {base}/v1/webhook-endpoints -d \'{{"url": "{hook_url}"}}\'\n'
        "  # a notification to it, due now; the receiver prints it as a hook | line:\n"
        f"  {post} -H 'Idempotency-Key: {uuid.uuid4()}' \\\n"
        f"       -X POST {base}/v1/notifications \\\n"
        f'       -d \'{{"channels": ["webhook"], "webhook_endpoint": "<endpoint id>", '
        '"subject": "Hello", "body": "From the demo"}\'\n'
        f"  API docs: {base}/v1/docs\n"
    )


def _processes(port: int, hook_port: int) -> list[ProcessSpec]:
    manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
    return [
        ProcessSpec("web", [*manage, "runserver", f"{HOST}:{port}", "--noreload"]),
        ProcessSpec(
            "tick",
            [*manage, "run_tick", "--loop", "--interval", str(TICK_INTERVAL_SECONDS)],
            hide=_idle_tick,
        ),
        ProcessSpec("jobs", [*manage, "consume_jobs", "--loop", "--interval", "1"]),
        ProcessSpec("hook", [*manage, "demo_receiver", "--port", str(hook_port)]),
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
