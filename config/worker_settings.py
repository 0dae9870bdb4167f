"""Settings of the queues' workers: the notifications scheduler (run_tick), the jobs outbox
(consume_jobs) and retention (prune). config.settings, which Django loads, takes them all."""

from django.core.exceptions import ImproperlyConfigured

from config.environment import env, flag, http_url, not_negative, positive, read, seconds_list
from outbound import mailers

# --- Notifications scheduler (run_tick) ----------------------------------------------------
TICK_LIMIT = int(positive("TICK_LIMIT", read("TICK_LIMIT", env.int, 100)))
CLAIM_LEASE_SECONDS = positive("CLAIM_LEASE_SECONDS", read("CLAIM_LEASE_SECONDS", env.float, 45.0))
CHANNEL_TIMEOUT_SECONDS = positive(
    "CHANNEL_TIMEOUT_SECONDS", read("CHANNEL_TIMEOUT_SECONDS", env.float, 10.0)
)
# The environment keeps the seed's name (MAX_ATTEMPTS); the setting says whose attempts they are.
NOTIFICATION_MAX_ATTEMPTS = int(positive("MAX_ATTEMPTS", read("MAX_ATTEMPTS", env.int, 3)))
BACKOFF_SECONDS = seconds_list("BACKOFF_SECONDS", "60,300,1800")
TICK_CONCURRENCY = int(positive("TICK_CONCURRENCY", read("TICK_CONCURRENCY", env.int, 16)))
# CPU one row may cost to find its schedule's next occurrence; costlier rules are refused.
RECURRENCE_BUDGET_MS = positive(
    "RECURRENCE_BUDGET_MS", read("RECURRENCE_BUDGET_MS", env.float, 20.0)
)
TICK_TIME_BUDGET_SECONDS = positive(
    "TICK_TIME_BUDGET_SECONDS", read("TICK_TIME_BUDGET_SECONDS", env.float, 40.0)
)
# Unset: a tick drains until nothing is due or its budget is spent.
TICK_MAX_ROWS = read("TICK_MAX_ROWS", env.int, None)
if TICK_MAX_ROWS is not None:
    positive("TICK_MAX_ROWS", TICK_MAX_ROWS)
# How long after an occurrence (or a job) was first due a provider's "later" (429, 503 with
# Retry-After) still defers it for free; past it, the answer counts as a failure.
BACKPRESSURE_MAX_DEFER_SECONDS = positive(
    "BACKPRESSURE_MAX_DEFER_SECONDS", read("BACKPRESSURE_MAX_DEFER_SECONDS", env.float, 86_400.0)
)
# On PostgreSQL, a tick busy with a burst of webhooks sends them from a process of its own
# when the machine has a core to spare (notifications/scheduler/sending_process.py).
TICK_SENDING_PROCESS = flag("TICK_SENDING_PROCESS", True)
WEBHOOK_ENDPOINT_CONCURRENCY = int(
    positive("WEBHOOK_ENDPOINT_CONCURRENCY", read("WEBHOOK_ENDPOINT_CONCURRENCY", env.int, 4))
)
WEBHOOK_CIRCUIT_FAILURES = int(
    positive("WEBHOOK_CIRCUIT_FAILURES", read("WEBHOOK_CIRCUIT_FAILURES", env.int, 5))
)
# An endpoint that failed every delivery for this long (no success in between) is disabled.
ENDPOINT_DISABLE_AFTER_HOURS = positive(
    "ENDPOINT_DISABLE_AFTER_HOURS", read("ENDPOINT_DISABLE_AFTER_HOURS", env.float, 120.0)
)
if CLAIM_LEASE_SECONDS < CHANNEL_TIMEOUT_SECONDS + 5:
    raise ImproperlyConfigured(
        "CLAIM_LEASE_SECONDS must exceed CHANNEL_TIMEOUT_SECONDS by at least 5 seconds so a "
        "lease always covers a row's worst case"
    )

RESEND_API_KEY = read("RESEND_API_KEY", env.str, "")
RESEND_API_URL = read("RESEND_API_URL", env.str, "https://api.resend.com").rstrip("/")
# Requests per second to Resend across every tick process (Resend's default team limit).
RESEND_RATE_LIMIT = positive("RESEND_RATE_LIMIT", read("RESEND_RATE_LIMIT", env.float, 2.0))
NOTIFICATIONS_EMAIL_FROM = read(
    "NOTIFICATIONS_EMAIL_FROM", env.str, "Tickwork <notifications@tickwork.invalid>"
)
# Printed as written, links whole (Django 6.1's own console backend prints quoted-printable).
_email_backend = read("EMAIL_BACKEND", env.str, "operations.console_email.ReadableConsoleBackend")
# The one variable becomes the setting the running Django wants: MAILERS from 6.1 on, where
# EMAIL_BACKEND is deprecated (and refused beside MAILERS), EMAIL_BACKEND on 5.2.
if mailers.USES_MAILERS:
    MAILERS = mailers.mailers_setting(_email_backend)
else:
    EMAIL_BACKEND = _email_backend
WEBHOOK_ALLOW_PRIVATE_TARGETS = flag("WEBHOOK_ALLOW_PRIVATE_TARGETS", False)
WEBHOOK_SECRET_GRACE_SECONDS = int(
    positive("WEBHOOK_SECRET_GRACE_SECONDS", read("WEBHOOK_SECRET_GRACE_SECONDS", env.int, 86_400))
)

# --- Jobs outbox (consume_jobs) ------------------------------------------------------------
JOB_MAX_ATTEMPTS = int(positive("JOB_MAX_ATTEMPTS", read("JOB_MAX_ATTEMPTS", env.int, 5)))
JOB_BACKOFF_SECONDS = seconds_list("JOB_BACKOFF_SECONDS", "10,60,300,1800")
JOB_LEASE_SECONDS = positive("JOB_LEASE_SECONDS", read("JOB_LEASE_SECONDS", env.float, 60.0))
# The most one Django task (`@task`, jobs.tasks) is expected to take: a claimed batch starts
# the next task only while its lease still covers that long. A task that outlives the lease
# (JOB_LEASE_SECONDS) is claimed again while it runs: make long work a job that renews it.
TASK_MAX_SECONDS = positive("TASK_MAX_SECONDS", read("TASK_MAX_SECONDS", env.float, 1.0))
PROVISIONING_URL = http_url("PROVISIONING_URL", "")
PROVISIONING_TIMEOUT_SECONDS = positive(
    "PROVISIONING_TIMEOUT_SECONDS", read("PROVISIONING_TIMEOUT_SECONDS", env.float, 10.0)
)

# --- Retention (prune) ---------------------------------------------------------------------
# 0 keeps nothing: `prune` refuses it without --yes rather than start-up refusing it.
RETENTION_DAYS = not_negative("RETENTION_DAYS", read("RETENTION_DAYS", env.int, 30))
JOB_RETENTION_DAYS = not_negative(
    "JOB_RETENTION_DAYS", read("JOB_RETENTION_DAYS", env.int, RETENTION_DAYS)
)
DELIVERY_RETENTION_DAYS = not_negative(
    "DELIVERY_RETENTION_DAYS", read("DELIVERY_RETENTION_DAYS", env.int, RETENTION_DAYS)
)
PRUNE_BATCH_SIZE = int(positive("PRUNE_BATCH_SIZE", read("PRUNE_BATCH_SIZE", env.int, 1000)))
