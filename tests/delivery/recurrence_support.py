"""Budgets that do not depend on the machine's speed: a clock that never moves leaves only
the count of work (dateutil's steps and occurrences, in estimated µs) to bound a search."""

import datetime as datetime_module

from delivery.recurrence import CpuBudget
from delivery.recurrence.cost import WORK_PER_MS


def _still_clock() -> float:
    return 0.0


def step_budget(steps: int) -> CpuBudget:
    """A budget of `steps` estimated microseconds of dateutil's walk, whatever the machine."""
    return CpuBudget(limit_ms=steps / WORK_PER_MS, clock=_still_clock)


# Ample for every correctness test: a rule that never matches still ends in well under a second.
GENEROUS = 200_000


SECONDS = ",".join(map(str, range(60)))
HOURS = ",".join(map(str, range(24)))
DAYS = "MO,TU,WE,TH,FR,SA,SU"
# The shapes an attacker used: BY lists that multiply inside one period.
MULTIPLIED = [
    f"FREQ=YEARLY;BYDAY={DAYS};BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=YEARLY;BYDAY={DAYS};BYHOUR=0,1;BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=MONTHLY;BYMONTHDAY={','.join(map(str, range(1, 32)))};BYHOUR={HOURS};BYMINUTE=0,30",
    f"FREQ=DAILY;BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYDAY={DAYS};BYHOUR=0,6,12,18",
    f"FREQ=WEEKLY;BYDAY={DAYS};BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11;BYMINUTE={SECONDS}",
    f"FREQ=HOURLY;BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=MONTHLY;BYDAY=MO,TU;BYMINUTE={SECONDS};BYSECOND=0,30;BYSETPOS=1",
]


class AnyDatetime(type):
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, datetime_module.datetime)


class CountingDatetime(datetime_module.datetime, metaclass=AnyDatetime):
    """dateutil's datetime, counting the occurrences it builds."""

    built = 0

    @classmethod
    def combine(cls, date, time, *args):
        CountingDatetime.built += 1
        return datetime_module.datetime.combine(date, time, *args)
