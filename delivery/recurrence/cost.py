"""The bound on finding a schedule's next occurrence (RECURRENCE_BUDGET_MS).

Pure (stdlib only). The budget is counted twice over, and a search stops at whichever runs
out first:

- in **work**: every occurrence dateutil expands or yields and every step it takes from
  one period to the next, each charged before dateutil does it, at what it costs in
  estimated microseconds of CPU (``bounds``: OCCURRENCE_COST, the step costs;
  bench/recurrence.py measures them). The count does not depend on the machine, so whether
  a rule is admitted is the same answer everywhere, and a period that holds more than the
  whole allowance is refused before dateutil expands any of it;
- in **CPU time**, read on `clock` (the calling thread's CPU time by default), as the
  backstop for what the estimate does not model; tests inject a clock they control.

A search that outruns either raises ``RuleTooCostly`` instead of running on.
RuleTooCostly is defined beside the rule checks, which also raise it, and named here.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from delivery.recurrence.rules import RuleTooCostly

__all__ = ["CpuBudget", "CpuMeter", "RuleTooCostly"]

DEFAULT_BUDGET_MS = 20.0
# The work a millisecond of the budget pays for: work is counted in estimated microseconds.
WORK_PER_MS = 1000
# The walk reads the clock once per this many steps: reading a thread's CPU clock is a
# system call that costs more than a step of dateutil's walk.
STEPS_PER_READING = 32


@dataclass(frozen=True)
class CpuBudget:
    """At most `limit_ms` of CPU, read on `clock` (seconds), and at most the work that many
    milliseconds pay for."""

    limit_ms: float = DEFAULT_BUDGET_MS
    clock: Callable[[], float] = field(default=time.thread_time, compare=False)
    # The configured budget that messages name, when this is a share of it.
    named_ms: float | None = None

    @property
    def allowance(self) -> int:
        """The work this budget pays for, in estimated microseconds."""
        return int(self.limit_ms * WORK_PER_MS)

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
    """One search's account of work and CPU against its budget."""

    def __init__(self, budget: CpuBudget) -> None:
        self.budget = budget
        self.started = budget.clock()
        self.steps = 0
        self.work = 0

    @property
    def spent_ms(self) -> float:
        return (self.budget.clock() - self.started) * 1000

    @property
    def named_ms(self) -> float:
        return self.budget.named_ms or self.budget.limit_ms

    def admit_period(self, cost: int, period: str) -> None:
        """Charge, before dateutil expands it, the first period of a search: one whose
        occurrences alone cost more than the whole allowance is refused unexpanded."""
        if cost > self.budget.allowance:
            raise RuleTooCostly(
                f"rrule is too costly: one {period} of it holds more occurrences than "
                f"RECURRENCE_BUDGET_MS ({self.named_ms:g} ms of CPU) pays for a search to "
                "expand. Use a finer FREQ with shorter BY lists (for example FREQ=MINUTELY "
                "instead of a BYMINUTE list)."
            )
        self.charge(cost)

    def charge(self, cost: int) -> None:
        """Count one step of the walk costing `cost`; read the clock every
        STEPS_PER_READING steps."""
        self.steps += 1
        self.work += cost
        if self.work > self.budget.allowance:
            self._refuse()
        if self.steps % STEPS_PER_READING == 0:
            self.check()

    def check(self) -> None:
        """Raise RuleTooCostly once the budget is spent."""
        if self.spent_ms > self.budget.limit_ms:
            self._refuse()

    def _refuse(self) -> None:
        raise RuleTooCostly(
            "rrule is too costly: its next occurrence could not be found within "
            f"RECURRENCE_BUDGET_MS ({self.named_ms:g} ms of CPU). Rules that "
            "match rarely for their FREQ (for example a MINUTELY rule narrowed to one "
            "weekday by BYDAY and BYHOUR), rules with long BY lists and COUNT rules, "
            "which are walked from fire_at, cost the most: use a coarser FREQ, fewer "
            "filters, a smaller COUNT or a later fire_at."
        )
