"""Recurrence cost scenario for bench/load.py (`--scenario costly_rules`). Prints; never judges.

The costliest rules a client can get accepted (RECURRENCE_BUDGET_MS, default 20 ms): a COUNT
rule anchored in 1970, walked from there on every search, with the largest COUNT the create
check admits (found by bisection through notification_create), and the issue's sparse
MINUTELY rule. 100 rows of one tenant due at once, one row of another tenant due at the same
time; one real tick against a local receiver. Prints that row's delivery lateness (goal
within 5 s of due) and the tick's CPU per row spent finding next occurrences, p50/p99/max
(goal: p99 under the budget). Then the issue's rule (4.2 s per row before the bound) written
straight to the table, as a row from before the check would be: 12 rows, the same figures,
and how the rows ended.

Then every FREQ with BY lists that multiply inside a period (README: The scheduler, what a rule may
cost): for each FREQ the longest list the create check admits (bisection through
notification_create), the CPU of a create through the API (in process, bearer token; goal p99 ≤ 25
ms), and one tick over 120 rows of those rules beside another tenant's row (goal: tick CPU per row
p99 ≤ 20 ms, that row within 5 s). Last, the shapes the issue found (5-12 s per create before)
written straight to the table: what the tick spends on them, and how they ended."""

import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.load_tick import _endpoint, arrivals, start_recording_sink

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
COUNT_RULE = "FREQ=MINUTELY;COUNT={};BYHOUR=5;BYMINUTE=3"
SPARSE_RULE = "FREQ=MINUTELY;INTERVAL=11;BYMINUTE=7;BYHOUR=3;BYDAY=MO"
SPARSE_ANCHOR = datetime(2026, 11, 30, 2, 56, tzinfo=UTC)  # the issue's fire_at
ISSUE_RULE = COUNT_RULE.format(10_000)


def _accepted(tenant, endpoint, rrule: str, fire_at: datetime):
    from notifications.services import notification_create
    from web.errors import InvalidInput

    try:
        return notification_create(
            tenant=tenant,
            channels=["webhook"],
            subject="Costly",
            webhook_endpoint_id=endpoint.pk,
            fire_at=fire_at,
            rrule=rrule,
        )
    except InvalidInput:
        return None


def _largest_count(tenant, endpoint) -> int:
    low, high = 1, 10_000  # low is accepted, high refused (or the maximum)
    while high - low > 1:
        middle = (low + high) // 2
        row = _accepted(tenant, endpoint, COUNT_RULE.format(middle), EPOCH)
        if row is not None:
            row.delete()
            low = middle
        else:
            high = middle
    return low


def _timed_advance(spent: list[float]):
    """Wrap the scheduler's advance() so each call's thread CPU is recorded."""
    from delivery.scheduler import plan

    original = plan.advance

    def timed(*args, **kwargs):
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append((time.thread_time() - started) * 1000)

    plan.advance = timed
    return original


def _tick_figures(db: str, label: str, quiet_row, due: datetime, log: Path) -> None:
    from delivery.scheduler import plan
    from delivery.scheduler.tick import run_tick

    spent: list[float] = []
    original = _timed_advance(spent)
    try:
        summary = run_tick()
    finally:
        plan.advance = original
    seen = dict((msg, at) for at, msg in arrivals(log))
    quiet_at = seen.get(f"notification_{quiet_row.id}_1")
    late = f"{quiet_at - due.timestamp():+.2f}s" if quiet_at else "not delivered"
    ordered = sorted(spent)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0
    print(
        f"[{db}] {label}: tick {summary.duration:.2f}s, {summary.delivered} delivered, "
        f"{summary.dead_lettered} dead-lettered; other tenant's row {late} after due; "
        f"CPU per row finding the next occurrence p50 {statistics.median(ordered):.1f} ms, "
        f"p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms over {len(ordered)} rows"
    )


SECONDS = ",".join(map(str, range(60)))
HOURS = ",".join(map(str, range(24)))
DAYS = "MO,TU,WE,TH,FR,SA,SU"


MONTH_DAYS = ",".join(map(str, range(1, 32)))


def _first(count: int) -> str:
    return ",".join(map(str, range(count)))


# For each FREQ, a rule whose last BY list takes its first n values: the longer, the costlier.
LONG_LISTS = {
    "YEARLY": (lambda n: f"FREQ=YEARLY;BYDAY={DAYS};BYHOUR={_first(n)}", 24),
    "MONTHLY": (
        lambda n: f"FREQ=MONTHLY;BYMONTHDAY={MONTH_DAYS};BYHOUR={_first(n)}",
        24,
    ),
    "WEEKLY": (lambda n: f"FREQ=WEEKLY;BYDAY={DAYS};BYHOUR={HOURS};BYMINUTE={_first(n)}", 60),
    "DAILY": (lambda n: f"FREQ=DAILY;BYHOUR={HOURS};BYMINUTE={_first(n)}", 60),
    "HOURLY": (lambda n: f"FREQ=HOURLY;BYMINUTE={SECONDS};BYSECOND={_first(n)}", 60),
    "MINUTELY": (lambda n: f"FREQ=MINUTELY;BYSECOND={_first(n)}", 60),
}
# The issue's shapes: accepted before, seconds of CPU per create, PATCH and tick.
MULTIPLIED = (
    f"FREQ=YEARLY;BYDAY={DAYS};BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=YEARLY;BYDAY={DAYS};BYHOUR=0,1;BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=MONTHLY;BYMONTHDAY={MONTH_DAYS};BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=DAILY;BYMINUTE={SECONDS};BYSECOND={SECONDS}",
    f"FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYHOUR={HOURS};BYMINUTE={SECONDS}",
)


def _longest_admitted(tenant, endpoint, build, most: int) -> tuple[str, int] | None:
    """The rule of `build` with the longest list notification_create admits from 1970."""
    low, high = 0, most + 1  # low admitted (0: none yet), high refused
    while high - low > 1:
        middle = (low + high) // 2
        row = _accepted(tenant, endpoint, build(middle), EPOCH)
        if row is not None:
            row.delete()
            low = middle
        else:
            high = middle
    return (build(low), low) if low else None


def _create_cpu(actor_token: str, tenant_id, endpoint_id, rrule: str, creates: int) -> list[float]:
    """Thread CPU of each POST /v1/notifications, in process, through the whole stack, less
    the time Python's cyclic garbage collector took inside it (printed apart: a full
    collection of this long-lived process lands on whichever request allocates last)."""
    import gc
    import uuid

    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {actor_token}", HTTP_X_TENANT_ID=str(tenant_id))
    collecting: list[float] = []

    def timed_collection(phase: str, info: dict) -> None:
        collecting.append(time.thread_time() * (1 if phase == "stop" else -1))

    spent, collected = [], []
    gc.callbacks.append(timed_collection)
    try:
        # The first request of a process imports and compiles what every later one reuses.
        for _ in range(creates + 1):
            body = {
                "channels": ["webhook"],
                "webhook_endpoint": str(endpoint_id),
                "subject": "Long lists",
                "body": "",
                "fire_at": "1970-01-01T00:00:00Z",
                "rrule": rrule,
            }
            collecting.clear()
            started = time.thread_time()
            response = client.post(
                "/v1/notifications",
                body,
                format="json",
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            in_gc = sum(collecting) if len(collecting) % 2 == 0 else 0.0
            spent.append((time.thread_time() - started - in_gc) * 1000)
            collected.append(in_gc * 1000)
            assert response.status_code == 201, response.content
    finally:
        gc.callbacks.remove(timed_collection)
    if max(collected[1:]) > 1:
        print(f"    (garbage collection inside these creates: up to {max(collected[1:]):.1f} ms)")
    return spent[1:]


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def long_list_rules(db: str, url: str, log: Path) -> None:
    from django.conf import settings
    from django.utils import timezone

    from delivery.models import Notification
    from tenancy.models import Tenant
    from tenancy.services import tenant_create

    settings.THROTTLE_RATE_USER = "100000000/s"
    grant = tenant_create(name="lists", owner_email="lists@example.com")
    quiet = Tenant.objects.create(name="quiet lists")
    endpoint, quiet_endpoint = _endpoint(grant.tenant, url), _endpoint(quiet, url)
    admitted = {}
    for freq, (build, most) in LONG_LISTS.items():
        found = _longest_admitted(grant.tenant, endpoint, build, most)
        if found is None:
            print(f"[{db}] long_lists: {freq}: no list length admitted")
            continue
        rule, length = found
        spent = _create_cpu(grant.token, grant.tenant.pk, endpoint.pk, rule, creates=40)
        admitted[freq] = rule
        print(
            f"[{db}] long_lists: {freq}: longest admitted last list {length} of {most}; "
            f"create CPU p50 {statistics.median(spent):.1f} ms, p99 {_p99(spent):.1f} ms, "
            f"max {max(spent):.1f} ms over {len(spent)} creates"
        )
    Notification.objects.all().delete()
    due = timezone.now().replace(microsecond=0)
    rules = list(admitted.values())
    for index in range(120):
        _accepted(grant.tenant, endpoint, rules[index % len(rules)], EPOCH)
    Notification.objects.update(next_fire_at=due, due_at=due)
    quiet_row = _accepted(quiet, quiet_endpoint, "", due)
    _tick_figures(db, "120 rows of the longest admitted lists", quiet_row, due, log)

    Notification.objects.all().delete()
    due = timezone.now().replace(microsecond=0)
    Notification.objects.bulk_create(
        [
            Notification(
                tenant=grant.tenant,
                channels=["webhook"],
                webhook_endpoint=endpoint,
                subject="Before the check",
                rrule=MULTIPLIED[index % len(MULTIPLIED)],
                recurrence_anchor=EPOCH,
                next_fire_at=due,
                due_at=due,
            )
            for index in range(12)
        ]
    )
    quiet_row = _accepted(quiet, quiet_endpoint, "", due)
    _tick_figures(db, "12 rows of the issue's multiplied shapes", quiet_row, due, log)
    reasons = set(
        Notification.objects.filter(tenant=grant.tenant).values_list(
            "dead_letter_reason", flat=True
        )
    )
    print(f"[{db}] long_lists: those rows ended dead-lettered as {sorted(reasons)}")


def costly_rules(db: str) -> None:
    from django.conf import settings
    from django.utils import timezone

    from delivery.models import Notification
    from tenancy.models import Tenant

    log = Path(tempfile.gettempdir()) / f"tw_bench_recurrence_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        noisy, quiet = Tenant.objects.create(name="noisy"), Tenant.objects.create(name="quiet")
        endpoint, quiet_endpoint = _endpoint(noisy, url), _endpoint(quiet, url)
        count = _largest_count(noisy, endpoint)
        refused = _accepted(noisy, endpoint, ISSUE_RULE, EPOCH) is None
        print(
            f"[{db}] costly_rules: RECURRENCE_BUDGET_MS {settings.RECURRENCE_BUDGET_MS:g}; "
            f"largest COUNT admitted for {COUNT_RULE.format('N')} from 1970: {count}; "
            f"the issue's COUNT=10000 rule refused at create: {refused}"
        )
        refusals = 0
        for index in range(100):
            row = None
            while row is None:
                # Near the bound the check's own CPU varies: a refusal lowers COUNT a little.
                rule = COUNT_RULE.format(count) if index % 2 else SPARSE_RULE
                row = _accepted(noisy, endpoint, rule, EPOCH if index % 2 else SPARSE_ANCHOR)
                refusals, count = refusals + (row is None), count - (row is None)
        print(
            f"[{db}] costly_rules: 50 rows at COUNT={count} ({refusals} refusals near the bound)"
            f" and 50 rows of {SPARSE_RULE}"
        )
        # Due at once, all of them, as the tick starts (the creates above took seconds).
        due = timezone.now().replace(microsecond=0)
        Notification.objects.update(next_fire_at=due, due_at=due)
        quiet_row = _accepted(quiet, quiet_endpoint, "", due)
        _tick_figures(db, "100 costliest admitted rows", quiet_row, due, log)

        Notification.objects.all().delete()
        due = timezone.now().replace(microsecond=0)
        Notification.objects.bulk_create(
            [
                Notification(
                    tenant=noisy,
                    channels=["webhook"],
                    webhook_endpoint=endpoint,
                    subject="Before the check",
                    rrule=ISSUE_RULE,
                    recurrence_anchor=EPOCH,
                    next_fire_at=due,
                    due_at=due,
                )
                for _ in range(12)
            ]
        )
        quiet_row = _accepted(quiet, quiet_endpoint, "", due)
        _tick_figures(
            db, "12 rows of the issue's rule written before the check", quiet_row, due, log
        )
        reasons = set(
            Notification.objects.filter(tenant=noisy).values_list("dead_letter_reason", flat=True)
        )
        print(f"[{db}] costly_rules: those rows ended dead-lettered as {sorted(reasons)}")
        Notification.objects.all().delete()
        long_list_rules(db, url, log)
    finally:
        sink.kill()
        sink.wait()
