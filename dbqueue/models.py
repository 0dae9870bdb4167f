"""The one table the queue machinery owns: the workers' cumulative counters."""

from django.db import models
from django.utils import timezone


class WorkerTotal(models.Model):
    """A cumulative counter of a worker (run_tick, consume_jobs, …) for /metrics: runs, rows
    claimed and each outcome since installation. Not tenant data. Every finished tick and
    every batch that claimed work adds to these rows in one statement; counters survive
    restarts and `prune`, as Prometheus counters must."""

    worker = models.CharField(max_length=32)
    name = models.CharField(max_length=32)
    total = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["worker", "name"], name="worker_total_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.worker} {self.name}={self.total}"


class PaceBudget(models.Model):
    """The send budget of one rate-limited provider (e.g. "resend"), shared by every process
    on every machine: the next instant a request may go (GCRA's theoretical arrival time),
    in microseconds since the Unix epoch so one UPDATE can move it on either database.
    Taking a slot moves it forward by one interval; a provider's "slow down" moves it to the
    time the provider named. See dbqueue/pacing.py."""

    name = models.CharField(max_length=64, primary_key=True)
    next_slot_us = models.BigIntegerField()
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} next slot at {self.next_slot_us} µs"


class RateWindow(models.Model):
    """One request counter of a rate limit (a user, or a client address for anonymous
    requests and failed authentication), shared by every web worker on every machine.

    The window starts at the key's first request and lasts the rate's period; the first
    request after it ends starts the next one. Times are microseconds since the Unix epoch
    on the database's clock, so one statement counts and compares on either database. See
    dbqueue/ratelimit.py."""

    key = models.CharField(max_length=100, primary_key=True)
    count = models.IntegerField()
    expires_us = models.BigIntegerField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.count} until {self.expires_us} µs"
