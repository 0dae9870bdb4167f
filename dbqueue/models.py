"""The tables the queue machinery owns: the workers' cumulative counters, the shared send
budgets, rate-limit counters and concurrency slots."""

from datetime import datetime

from django.db import models
from django.utils import timezone

from dbqueue.clock import instant


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


class ConcurrencySlot(models.Model):
    """One of the slots that bound how much work on one scope (e.g. "webhook:<endpoint id>")
    runs at once across every process on every machine. A holder (one tick) takes free
    slots for a lease and must renew them before it runs out; a holder that died frees its
    slots when their lease lapses. `holder` is empty when nobody holds the slot. Times are
    microseconds since the Unix epoch, so one statement compares on either database. See
    dbqueue/slots.py."""

    scope = models.CharField(max_length=100)
    slot = models.PositiveSmallIntegerField()
    holder = models.CharField(max_length=32, default="", blank=True)
    held_until_us = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "slot"], name="concurrency_slot_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} #{self.slot}: {self.holder or 'free'}"

    @property
    def held_until(self) -> datetime:
        return instant(self.held_until_us)
