"""`manage.py demo`: set up a local install with a demo tenant and run every process.

Migrates, creates (or reuses) the demo tenant and its owner, prints a fresh token and curl
examples, then runs the development server, `run_tick --loop`, `consume_jobs --loop`, a
local webhook receiver (`demo_receiver`) and the example front end (`demo_frontend`) under
operations.demo.supervisor until Ctrl-C (or SIGTERM). Only these children may deliver webhooks
to private addresses such as 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE_TARGETS); the setting stays
off everywhere else. `--no-serve` stops after the set-up.

The receiver listens on the same port every run (`--receiver-port`, 8001), so the webhook
endpoints an earlier run created on the same database still reach it. When that port is
taken the receiver falls back to a free one, and the demo says which endpoints miss it.

The example front end (examples/frontend) is served on http://localhost:3000
(`--frontend-port`; a free port when it is taken), the origin the emailed links point to,
so it calls the API across origins as a real front end does. The API allows that origin and
http://127.0.0.1:3000, the same page under the address the demo prints for everything else
(CORS_ALLOWED_ORIGINS).

Signup is on in the children, checked with Cloudflare Turnstile's documented always-passing
test secret against a local stand-in siteverify (`demo_siteverify`, on a free port), so the
printed signup → verify → invite → accept calls run as pasted; their tokens arrive in the
emails the console backend prints under `tick |`. The per-address signup and signin
limits are raised (SIGNUP_RATE_IP, SIGNIN_RATE_IP: 100 an hour) so that a developer trying
the pages is not locked out; a value in the environment wins.

`/metrics` is on in the children (METRICS_ENABLED), so the queues can be watched as they
drain; its URL is printed with the others.
"""

import os
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.demo.setup import demo_setup
from operations.demo.siteverify import (
    DUMMY_TOKEN,
    PASSING_SECRET,
    SITEVERIFY_PATH,
    TEST_HOSTNAME,
)
from operations.demo.supervisor import (
    PortUnavailable,
    ProcessSpec,
    Supervisor,
    describe_returncode,
    free_port,
    port_check,
)
from outbound import mailers

HOST = "127.0.0.1"
# A notification due now goes out within this many seconds (cron's minute is too slow to
# watch an invitation arrive).
TICK_INTERVAL_SECONDS = 2
RECEIVER_PORT = 8001
# The example front end's port: SIGNUP_VERIFY_URL and the other links default to its origin.
FRONT_END_PORT = 3000
CONSOLE_EMAIL_BACKEND = "operations.console_email.ReadableConsoleBackend"
# Enough signups and signins an hour from one address for a developer trying the pages.
DEMO_LINK_RATE = "100/hour"
# The pages the emailed links open, on the front end's origin.
LINK_PAGES = {
    "SIGNUP_VERIFY_URL": "/signup/verify?token={token}",
    "INVITATION_ACCEPT_URL": "/invitations/accept?token={token}",
    "SIGNIN_URL": "/signin/verify?token={token}",
}


class Command(BaseCommand):
    help = "Set up a demo tenant on the configured database and run the whole product locally."
    # Run by `handle` once the arguments are checked: since Django 6.1 the system checks
    # open the database (a JSONField's check asks it), and a refused run must leave none.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--receiver-port",
            type=int,
            default=RECEIVER_PORT,
            help=f"the webhook receiver's port, the same every run ({RECEIVER_PORT}); "
            "a free one when it is taken",
        )
        parser.add_argument(
            "--frontend-port",
            type=int,
            default=FRONT_END_PORT,
            help=f"the example front end's port ({FRONT_END_PORT}); a free one when it is taken",
        )
        parser.add_argument("--no-serve", action="store_true", help="Set up and exit.")

    def handle(
        self,
        *args: Any,
        port: int,
        receiver_port: int,
        frontend_port: int,
        no_serve: bool,
        **options: Any,
    ) -> None:
        if not settings.DEBUG:
            raise CommandError("demo is for local development: run it with DEBUG=true")
        _check_range("--receiver-port", receiver_port)
        _check_range("--frontend-port", frontend_port)
        if not no_serve:
            _check_port(port)
        self.check()
        try:
            call_command("migrate", verbosity=0, interactive=False)
            demo = demo_setup()
        except KeyboardInterrupt:
            raise CommandError("interrupted during the set-up", returncode=130) from None
        hook_port, fallback = (
            (receiver_port, "") if no_serve else _receiver_port(receiver_port, port)
        )
        page_port, page_fallback = (
            (frontend_port, "")
            if no_serve
            else _front_end_port(frontend_port, taken=(port, hook_port))
        )
        base, hook_url = f"http://{HOST}:{port}", f"http://{HOST}:{hook_port}/hook"
        self.stdout.write(
            f"Demo tenant {demo.grant.tenant.name} ({demo.grant.tenant.id}), "
            f"owner {demo.grant.user.email}\n"
            f"API token (shown once): {demo.grant.token}\n"
            f"Admin: {base}/admin/  user {demo.admin_username}  password {demo.admin_password}\n"
            f"Metrics: {base}/metrics (Prometheus text){_metrics_access()}\n"
            f"Webhook receiver: {hook_url} (prints each verified delivery){fallback}\n"
            f"Front end: {_front_end_url(page_port, port)} (examples/frontend; "
            f"its emailed links are printed under tick |){page_fallback}\n"
            f"{_side_effects()}\n\n" + _examples(base, token=demo.grant.token, hook_url=hook_url)
        )
        if not no_serve:
            self._serve(port, hook_port, page_port)

    def _serve(self, port: int, hook_port: int, page_port: int) -> None:
        captcha_port = free_port(HOST)
        supervisor = Supervisor(
            _processes(port, hook_port, captcha_port, page_port),
            out=self.stdout,
            # Unbuffered, so each line shows up when it is written, not a block later.
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
                "METRICS_ENABLED": "true",
                **_front_end_environment(page_port),
                **_signup_environment(captcha_port),
            },
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


def _check_range(flag: str, port: int) -> None:
    if not 0 < port < 65536:
        raise CommandError(f"{flag} must be between 1 and 65535, got {port}")


def _check_port(port: int) -> None:
    _check_range("--port", port)
    try:
        port_check(HOST, port)
    except PortUnavailable as exc:
        raise CommandError(f"{exc}: stop what is using it or pick another --port") from None


def _receiver_port(wanted: int, api_port: int) -> tuple[int, str]:
    """The receiver's port, and a warning when it is not `wanted`: endpoints created for
    the wanted port by an earlier run will not reach this receiver."""
    try:
        if wanted == api_port:
            raise PortUnavailable(f"port {wanted} on {HOST} is the API's (--port)")
        port_check(HOST, wanted)
    except PortUnavailable as exc:
        fallback = free_port(HOST)
        return fallback, (
            f"\n  {exc}, so the receiver listens on port {fallback} this run: endpoints "
            f"created for http://{HOST}:{wanted}/hook will not reach it (free that port or "
            "pick another --receiver-port)"
        )
    return wanted, ""


def _front_end_port(wanted: int, *, taken: tuple[int, ...]) -> tuple[int, str]:
    """The front end's port, and a warning when it is not `wanted` (the emailed links and
    the allowed origin follow the port it gets)."""
    try:
        if wanted in taken:
            raise PortUnavailable(f"port {wanted} on {HOST} is another demo process's")
        port_check(HOST, wanted)
    except PortUnavailable as exc:
        fallback = free_port(HOST)
        return fallback, (
            f"\n  {exc}, so the front end is served on port {fallback} this run (free that "
            "port or pick another --frontend-port)"
        )
    return wanted, ""


def _front_end_origin(page_port: int) -> str:
    return f"http://localhost:{page_port}"


def _front_end_url(page_port: int, api_port: int) -> str:
    """The page's address; it names the API when the API is not on the page's default."""
    url = f"{_front_end_origin(page_port)}/"
    return url if api_port == 8000 else f"{url}?api=http://localhost:{api_port}"


def _front_end_environment(page_port: int) -> dict[str, str]:
    """The front end's origins allowed to call the API, and the emailed links on the first;
    what the developer's environment names wins. The page is served on 127.0.0.1, the
    address the demo prints, as well as on localhost: both origins may call the API."""
    origin = _front_end_origin(page_port)
    allowed = f"{origin},http://{HOST}:{page_port}"
    names = {"CORS_ALLOWED_ORIGINS": allowed} | {
        name: origin + page for name, page in LINK_PAGES.items()
    }
    return {name: os.environ.get(name, default) for name, default in names.items()}


# The first calls, as pasted after the variables `_examples` prints (the README's calls use
# the same variables). Every POST sends an Idempotency-Key that the shell makes when the
# line runs: python3 is wherever the demo runs, uuidgen is missing on a fresh Debian, and a
# key printed once would replay the first answer when the line is pasted again.
CALLS = r"""
curl -s -H "$H" -H 'Content-Type: application/json' \
     -H "Idempotency-Key: $(python3 -c 'import uuid; print(uuid.uuid4())')" \
     -X POST "$API/v1/projects" -d '{"name": "Website relaunch"}'
# poll the job named in the answer until its status is completed:
curl -s -H "$H" "$API/v1/jobs/<job id>"
curl -s -H "$H" "$API/v1/projects"
# a webhook endpoint at the demo's receiver (the answer shows its secret once):
curl -s -H "$H" -H 'Content-Type: application/json' \
     -H "Idempotency-Key: $(python3 -c 'import uuid; print(uuid.uuid4())')" \
     -X POST "$API/v1/webhook-endpoints" -d "{\"url\": \"$HOOK\"}"
# a notification to it, due now; the receiver prints it as a hook | line:
curl -s -H "$H" -H 'Content-Type: application/json' \
     -H "Idempotency-Key: $(python3 -c 'import uuid; print(uuid.uuid4())')" \
     -X POST "$API/v1/notifications" -d '{"channels": ["webhook"],
       "webhook_endpoint": "<endpoint id>", "subject": "Hello", "body": "From the demo"}'
"""


# The front door, as a new team and its invitee would go through it. The public calls need no
# token; Turnstile's dummy response token passes with the test secret the demo runs with.
FRONT_DOOR_CALLS = rf"""
# sign a new team up (public; the CAPTCHA is Turnstile's test secret against a stand-in):
curl -s -H 'Content-Type: application/json' -X POST "$API/v1/signup" \
     -d '{{"email": "founder@example.com", "tenant_name": "New team",
          "captcha_token": "{DUMMY_TOKEN}"}}'
# the verification email is printed under tick |: its link ends in token=<verification token>
curl -s -H 'Content-Type: application/json' -X POST "$API/v1/signup/verify" \
     -d '{{"token": "<verification token>"}}'
# invite a teammate into the demo tenant (the email is printed under tick | too):
curl -s -H "$H" -H 'Content-Type: application/json' \
     -H "Idempotency-Key: $(python3 -c 'import uuid; print(uuid.uuid4())')" \
     -X POST "$API/v1/invitations" -d '{{"email": "teammate@example.com", "role": "member"}}'
# its link ends in token=<invitation token>; accepting answers the teammate's session token:
curl -s -H 'Content-Type: application/json' -X POST "$API/v1/invitations/accept" \
     -d '{{"token": "<invitation token>"}}'
"""


def _signup_environment(captcha_port: int) -> dict[str, str]:
    """Signup on in the children, checked against the local stand-in siteverify, which
    answers Cloudflare's test secret for the host name `example.com`."""
    return {
        "SIGNUP_ENABLED": "true",
        "TURNSTILE_SECRET_KEY": PASSING_SECRET,
        "TURNSTILE_VERIFY_URL": f"http://{HOST}:{captcha_port}{SITEVERIFY_PATH}",
        "TURNSTILE_HOSTNAMES": TEST_HOSTNAME,
        "SIGNUP_RATE_IP": os.environ.get("SIGNUP_RATE_IP", DEMO_LINK_RATE),
        "SIGNIN_RATE_IP": os.environ.get("SIGNIN_RATE_IP", DEMO_LINK_RATE),
    }


def _examples(base: str, *, token: str, hook_url: str) -> str:
    variables = [f"TOKEN={token}", 'H="Authorization: Bearer $TOKEN"', f"API={base}"]
    calls = [*CALLS.strip().splitlines(), *FRONT_DOOR_CALLS.strip().splitlines()]
    lines = [*variables, f"HOOK={hook_url}", *calls]
    return (
        "Try it: paste these lines into bash, each <…> filled in from an earlier answer (the "
        "README's calls use the same variables):\n"
        + "".join(f"  {line}\n" for line in lines)
        + f"  # API docs: {base}/v1/docs\n"
    )


def _processes(port: int, hook_port: int, captcha_port: int, page_port: int) -> list[ProcessSpec]:
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
        ProcessSpec("turn", [*manage, "demo_siteverify", "--port", str(captcha_port)]),
        ProcessSpec("page", [*manage, "demo_frontend", "--port", str(page_port)]),
    ]


def _idle_tick(line: str) -> bool:
    """A tick summary with nothing to report: one every two seconds would bury the token
    and the examples above."""
    fields = dict(part.partition("=")[::2] for part in line.split())
    return fields.get("event") == "run_tick" and all(
        value == "0" for key, value in fields.items() if key not in ("event", "duration_s")
    )


def _metrics_access() -> str:
    """How to scrape /metrics when the developer's environment asks for a token."""
    return " with the METRICS_TOKEN of your environment" if settings.METRICS_TOKEN else ""


def _side_effects() -> str:
    """Where a new project's provisioning call and its invitation e-mail go."""
    if settings.PROVISIONING_URL:
        provisioning = f"provisioning calls {settings.PROVISIONING_URL}"
    else:
        provisioning = "no PROVISIONING_URL, so a new project is provisioned at once"
    if settings.RESEND_API_KEY:
        email = "e-mail is sent through Resend"
    elif mailers.backend_path() == CONSOLE_EMAIL_BACKEND:
        email = "e-mail is printed below (tick |)"
    else:
        email = f"e-mail goes through {mailers.backend_path()}"
    return f"Jobs: {provisioning}; {email}."
