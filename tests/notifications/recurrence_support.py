"""Budgets that do not depend on the machine's speed: a clock that moves one microsecond per
reading makes RECURRENCE_BUDGET_MS a count of dateutil's steps (the walk reads it once per
STEPS_PER_READING steps)."""

from notifications.recurrence import CpuBudget
from notifications.recurrence_cost import STEPS_PER_READING


class StepClock:
    """Seconds that advance by one microsecond each time they are read."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return self.readings / 1_000_000


def step_budget(steps: int) -> CpuBudget:
    """A budget of about `steps` steps of dateutil's walk, whatever the machine."""
    return CpuBudget(limit_ms=steps / STEPS_PER_READING / 1000, clock=StepClock())


# Ample for every correctness test: a rule that never matches still ends in well under a second.
GENEROUS = 200_000
