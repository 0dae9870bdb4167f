"""Every rule shape costs what the budget allows (docs/queues.md: what a rule may cost): the
work of a search is counted in what dateutil really expands — every occurrence of every period, not
only the ones it yields — and a rule whose periods hold more than a search may expand is refused
before dateutil expands any of it.

The count here is independent of the meter's own: the `expanded` fixture counts each
occurrence dateutil builds (`datetime.combine`, once per candidate, yielded or not). None
of it reads a clock: the budgets are counts of work."""

import contextlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.recurrence import (
    CpuBudget,
    InvalidRecurrence,
    RuleTooCostly,
    admitted_first_occurrence,
    validate_rrule,
)
from delivery.recurrence.bounds import OCCURRENCE_COST
from delivery.recurrence.rules import MAX_PERIOD_OCCURRENCES, parse_rule
from delivery.recurrence.walk import occurrence_after
from tests.delivery.recurrence_support import (
    DAYS,
    GENEROUS,
    MULTIPLIED,
    SECONDS,
    step_budget,
)

ANCHOR = datetime(1970, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)
# The least CPU a day that a sub-daily rule's day parts reject was measured to cost, in µs.
MEASURED_REJECTED_DAY_US = 3.5


@pytest.mark.parametrize("rule", MULTIPLIED)
def test_a_rule_whose_periods_multiply_is_refused_before_dateutil_expands_it(rule, expanded):
    with pytest.raises(RuleTooCostly, match=r"rrule is too costly: one (year|month|day|week|hour)"):
        admitted_first_occurrence(
            rrule=rule, tz_name="Europe/Berlin", anchor=ANCHOR, now=NOW, budget=CpuBudget()
        )

    assert expanded() == 0


def test_the_refusal_says_how_many_a_period_holds_and_what_to_write_instead():
    rule = f"FREQ=YEARLY;BYDAY={DAYS};BYMINUTE={SECONDS};BYSECOND={SECONDS}"

    with pytest.raises(RuleTooCostly) as refused:
        validate_rrule(rule)

    assert str(refused.value) == (
        "rrule is too costly: one year of it can hold 1,317,600 occurrences (its BY lists "
        f"multiply), more than the {MAX_PERIOD_OCCURRENCES:,} a year may hold. Use a finer "
        "FREQ with shorter BY lists (for example FREQ=MINUTELY instead of every BYMINUTE, or "
        "FREQ=HOURLY instead of every BYHOUR)."
    )


def test_a_period_over_a_small_budget_is_refused_unexpanded(expanded):
    # 8 hours x 60 minutes: within what a day may hold, beyond what 1 ms pays for.
    rule = f"FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16;BYMINUTE={SECONDS}"

    with pytest.raises(RuleTooCostly, match="one day of it holds more occurrences than"):
        admitted_first_occurrence(
            rrule=rule, tz_name="UTC", anchor=ANCHOR, now=NOW, budget=step_budget(1_000)
        )

    assert expanded() == 0


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # Long lists that stay within a period's bound are still answered exactly.
        (f"FREQ=YEARLY;BYDAY={DAYS};BYHOUR=9,17", datetime(2026, 12, 3, 17, tzinfo=UTC)),
        (f"FREQ=DAILY;BYHOUR=9,10,11;BYMINUTE={SECONDS}", datetime(2026, 12, 3, 9, 31, tzinfo=UTC)),
        (f"FREQ=MINUTELY;BYSECOND={SECONDS}", datetime(2026, 12, 3, 9, 30, 1, tzinfo=UTC)),
        ("FREQ=MONTHLY;BYMONTHDAY=1,8,15,22;BYHOUR=8,20", datetime(2026, 12, 8, 8, tzinfo=UTC)),
    ],
)
def test_long_lists_within_the_bound_find_their_next_occurrence(rule, expected, expanded):
    meter = CpuBudget().meter()

    found = occurrence_after(rule, "UTC", ANCHOR, threshold=NOW, meter=meter)

    assert found == expected
    assert OCCURRENCE_COST * expanded() <= meter.work <= CpuBudget().allowance


@pytest.mark.parametrize("freq", ["HOURLY", "MINUTELY"])
def test_each_day_a_sub_daily_rule_rejects_is_charged_as_the_several_steps_it_costs(freq):
    # From the evening of 29 February 2024 to 29 February 2028: 1,460 days rejected, once
    # counted 1 each.
    rule = f"FREQ={freq};BYMONTH=2;BYMONTHDAY=29"
    anchor = datetime(2024, 2, 29, 8, tzinfo=UTC)
    meter = step_budget(GENEROUS).meter()

    found = occurrence_after(
        rule, "UTC", anchor, threshold=datetime(2024, 2, 29, 23, 59, 30, tzinfo=UTC), meter=meter
    )

    assert found == datetime(2028, 2, 29, tzinfo=UTC)
    rejected_days = (datetime(2028, 2, 29) - datetime(2024, 3, 1)).days
    assert meter.work >= MEASURED_REJECTED_DAY_US * rejected_days


@pytest.mark.parametrize("freq", ["HOURLY", "MINUTELY"])
def test_a_sub_daily_rule_whose_days_are_decades_apart_is_refused_by_its_count(freq):
    # 29 February on a Monday: 2016, then 2044. Its probe rejects 10,226 days (40-75 ms of
    # CPU), which the count once priced at half the budget, leaving only the CPU clock to stop it.
    with pytest.raises(RuleTooCostly, match="could not be found within"):
        admitted_first_occurrence(
            rrule=f"FREQ={freq};BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
            tz_name="UTC",
            anchor=datetime(2016, 2, 29, 8, tzinfo=UTC),
            now=datetime(2016, 3, 1, tzinfo=UTC),
            budget=step_budget(CpuBudget().allowance),
        )


def test_the_issues_sparse_rule_is_admitted_by_its_count():
    # Its walk is interval additions (0.8 µs each, counted 1) with six rejected days a
    # search: its next two occurrences, eleven weeks apart, fit the budget.
    first = admitted_first_occurrence(
        rrule="FREQ=MINUTELY;INTERVAL=11;BYMINUTE=7;BYHOUR=3;BYDAY=MO",
        tz_name="UTC",
        anchor=datetime(2026, 11, 30, 2, 56, tzinfo=UTC),
        now=NOW,
        budget=step_budget(CpuBudget().allowance),
    )

    assert first == datetime(2026, 11, 30, 3, 7, tzinfo=UTC)


def _listed(values, min_size):
    return st.lists(
        st.sampled_from(values), min_size=min_size, max_size=len(values), unique=True
    ).map(lambda chosen: ",".join(map(str, sorted(chosen))))


@st.composite
def long_list_rules(draw):
    """Rules at every FREQ with BY lists up to their whole range."""
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]))
    lists = {
        "BYMONTH": _listed(list(range(1, 13)), 1),
        "BYDAY": _listed(DAYS.split(","), 1),
        "BYHOUR": _listed(list(range(24)), 1),
        "BYMINUTE": _listed(list(range(60)), 1),
        "BYSECOND": _listed(list(range(60)), 1),
    }
    if freq in ("YEARLY", "MONTHLY", "DAILY"):
        lists["BYMONTHDAY"] = _listed(list(range(1, 32)), 1)
    chosen = draw(st.lists(st.sampled_from(sorted(lists)), min_size=1, max_size=4, unique=True))
    parts = [f"FREQ={freq}"] + [f"{name}={draw(lists[name])}" for name in chosen]
    if draw(st.integers(0, 3)) == 0:
        parts.append(f"BYSETPOS={draw(st.sampled_from([1, 2, -1]))}")
    return ";".join(parts)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(
    rule=long_list_rules(),
    anchor=st.datetimes(datetime(2000, 1, 1), datetime(2030, 1, 1)),
    ahead=st.timedeltas(timedelta(0), timedelta(days=800)),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
)
def test_what_dateutil_expands_never_exceeds_the_counted_work_nor_the_budget(
    rule, anchor, ahead, zone, expanded
):
    try:
        validate_rrule(rule)
    except RuleTooCostly:
        return  # refused from the rule's text alone, before dateutil saw it
    except InvalidRecurrence:
        return
    budget = step_budget(CpuBudget().allowance)
    meter = budget.meter()
    before = expanded()
    anchor = anchor.replace(tzinfo=UTC)
    with contextlib.suppress(RuleTooCostly):
        occurrence_after(rule, zone, anchor, threshold=anchor + ahead, meter=meter)
    built = expanded() - before
    # At most one occurrence past what was charged: the one dateutil compares with UNTIL.
    assert OCCURRENCE_COST * (built - 1) <= meter.work
    # The search stops at the charge that goes past the allowance.
    assert meter.work <= budget.allowance + parse_rule(rule).period_cost
