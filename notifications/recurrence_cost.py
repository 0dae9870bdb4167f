"""The CPU bound on finding a schedule's next occurrence (RECURRENCE_BUDGET_MS).

Pure (stdlib only). A ``CpuBudget`` names the bound and the clock it is read on — the
calling thread's CPU time by default, so a busy machine does not make a rule look costlier
than it is; tests inject a clock they control (for example one that moves a fixed amount
per reading, which makes the bound a count of dateutil's steps). ``meter()`` starts one
search's account; the walk charges it at every step dateutil takes, and a search that
outruns the bound raises ``RuleTooCostly`` instead of running on.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from notifications.recurrence_rules import InvalidRecurrence

DEFAULT_BUDGET_MS = 20.0
# The walk reads the clock once per this many steps: reading a thread's CPU clock is a
# system call that costs more than a step of dateutil's walk.
STEPS_PER_READING = 32


class RuleTooCostly(InvalidRecurrence):
    """The next occurrence could not be found within the CPU budget; str(exc) says why and
    is safe to show the client."""


@dataclass(frozen=True)
class CpuBudget:
    """At most `limit_ms` of CPU, read on `clock` (seconds)."""

    limit_ms: float = DEFAULT_BUDGET_MS
    clock: Callable[[], float] = field(default=time.thread_time, compare=False)
    # The configured budget that messages name, when this is a share of it.
    named_ms: float | None = None

    def meter(self) -> "CpuMeter":
        return CpuMeter(self)

    def share(self, fraction: float) -> "CpuBudget":
        """The same clock with `fraction` of the limit."""
        return CpuBudget(
            limit_ms=self.limit_ms * fraction,
            clock=self.clock,
            named_ms=self.named_ms or self.limit_ms,
        )


class CpuMeter:
    """One search's account of CPU against its budget."""

    def __init__(self, budget: CpuBudget) -> None:
        self.budget = budget
        self.started = budget.clock()
        self.steps = 0

    @property
    def spent_ms(self) -> float:
        return (self.budget.clock() - self.started) * 1000

    def charge(self) -> None:
        """Count one step of the walk; check the budget every STEPS_PER_READING steps."""
        self.steps += 1
        if self.steps % STEPS_PER_READING == 0:
            self.check()

    def check(self) -> None:
        """Raise RuleTooCostly once the budget is spent."""
        if self.spent_ms > self.budget.limit_ms:
            named = self.budget.named_ms or self.budget.limit_ms
            raise RuleTooCostly(
                "rrule is too costly: its next occurrence could not be found within "
                f"RECURRENCE_BUDGET_MS ({named:g} ms of CPU). Rules that "
                "match rarely for their FREQ (for example a MINUTELY rule narrowed to one "
                "weekday by BYDAY and BYHOUR) and COUNT rules, which are walked from "
                "fire_at, cost the most: use a coarser FREQ, fewer filters, a smaller COUNT "
                "or a later fire_at."
            )
