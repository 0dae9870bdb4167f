"""What one claim of the tick costs as the backlog deepens (README: "Benchmarks"). Prints
figures; never judges.

    .venv/bin/python bench/claim_depth.py [--depths 5000,100000] [--tenants 200]
        [--endpoints 2000] [--claims 60] [--limit 16] [--per-endpoint 4] [--tick-seconds 30]

For each depth, a fresh PostgreSQL database (BENCH_TICK_DB, default tw_bench_tick, DROPPED
and re-created) gets that many due webhook rows spread evenly over --endpoints endpoints of
--tenants tenants, in creation order interleaved as a fan-out writes them. Then --claims
claims of --limit rows (at most --per-endpoint of one endpoint, as the tick asks) run one
after another, each rolled back so that every one meets the same backlog: the median and
p95 time of one claim, the rows it took, and the plan's sort nodes with the rows they
sorted (EXPLAIN ANALYZE of the claim's statement). Then one `run_tick` with a time budget of
--tick-seconds delivers to a local receiver (bench/tick_sink.py) that every endpoint points
at: its deliveries per second. The ratios of the deepest depth's figures to the
shallowest's close the report.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tick_db import prepare_environment  # noqa: E402

_SEED = """
INSERT INTO notifications_notification (
    id, tenant_id, webhook_endpoint_id, channels, email_to, subject, body, rrule, timezone,
    next_fire_at, occurrence, error_count, max_attempts, state, dead_letter_reason,
    claim_token, unfinished_claims, channel_state, created_at, updated_at)
SELECT gen_random_uuid(), e.tenant_id, e.id, '["webhook"]', '[]', 'Bench', 'Bench body', '',
       'UTC', %(due)s + make_interval(secs => n / 1000.0), 1, 0, 3, 'scheduled', '', 0, 0,
       '{}', %(due)s, %(due)s
FROM generate_series(0, %(count)s - 1) AS n
JOIN (SELECT id, tenant_id, row_number() OVER (ORDER BY id) - 1 AS k
      FROM notifications_webhookendpoint) AS e ON e.k = n %% %(endpoints)s
"""


def _seed(*, depth: int, tenants: int, endpoints: int, due: datetime, url: str) -> None:
    from django.db import connection

    from delivery.models import WebhookEndpoint
    from delivery.transports.signing import generate_secret
    from tenancy.models import Tenant

    owners = Tenant.objects.bulk_create([Tenant(name=f"bench {t}") for t in range(tenants)])
    WebhookEndpoint.objects.bulk_create(
        [
            WebhookEndpoint(
                tenant=owners[k % tenants],
                url=f"{url}?endpoint={k}",
                secret=generate_secret(),
            )
            for k in range(endpoints)
        ],
        batch_size=1000,
    )
    with connection.cursor() as cursor:
        cursor.execute(_SEED, {"due": due, "count": depth, "endpoints": endpoints})
        cursor.execute("ANALYZE notifications_notification")


def _sort_nodes(plan: dict) -> list[str]:
    found = []
    if "Sort" in plan["Node Type"]:
        found.append(f"{plan['Node Type']} of {plan.get('Actual Rows', '?')} rows")
    for child in plan.get("Plans", []):
        found.extend(_sort_nodes(child))
    return found


def one_depth(depth: int, args: argparse.Namespace) -> tuple[float, float]:
    """Claims per second and the tick's deliveries per second at `depth`, after printing
    the depth's figures."""
    prepare_environment("postgres")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from bench.load_tick import start_recording_sink
    from dbqueue.claims import claim_statement
    from delivery.scheduler.tick import DUE, notification_claim, run_tick

    call_command("migrate", verbosity=0)
    log = Path(tempfile.gettempdir()) / f"tw_bench_claim_depth_{depth}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        now = datetime.now(UTC)
        due = now - timedelta(hours=1)
        _seed(depth=depth, tenants=args.tenants, endpoints=args.endpoints, due=due, url=url)
        lease = timedelta(minutes=5)
        seconds, taken = [], 0
        for _ in range(args.claims):
            started = time.perf_counter()
            with transaction.atomic():
                claimed = notification_claim(
                    now=now, lease=lease, limit=args.limit, per_endpoint=args.per_endpoint
                )
                transaction.set_rollback(True)
            seconds.append(time.perf_counter() - started)
            taken += len(claimed)
        _, sql, params = claim_statement(
            DUE, now=now, lease=lease, limit=args.limit, cap=args.per_endpoint
        )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            plan = cursor.fetchone()[0]
            transaction.set_rollback(True)
        if isinstance(plan, str):
            plan = json.loads(plan)
        median = statistics.median(seconds)
        p95 = sorted(seconds)[int(0.95 * (len(seconds) - 1))]
        print(
            f"{depth:>8} due rows: claim median {median * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
            f"{taken / args.claims:.1f} rows a claim; sorts: "
            f"{', '.join(_sort_nodes(plan[0]['Plan'])) or 'none'}"
        )
        rate = 0.0
        if args.tick_seconds:
            summary = run_tick(time_budget=args.tick_seconds)
            rate = summary.delivered / max(summary.duration, 1e-9)
            print(
                f"{depth:>8} due rows: one tick delivered {summary.delivered} in "
                f"{summary.duration:.1f} s, {rate:.0f}/s"
            )
    finally:
        sink.kill()
        sink.wait()
        connection.close()
    return 1 / median, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="5000,100000")
    parser.add_argument("--tenants", type=int, default=200)
    parser.add_argument("--endpoints", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=60)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--per-endpoint", type=int, default=4)
    parser.add_argument("--tick-seconds", type=float, default=30.0)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        claims, deliveries = one_depth(args.child, args)
        print(f"RATE {claims} {deliveries}")
        return
    import subprocess

    rates = {}
    for depth in (int(d) for d in args.depths.split(",")):
        # Each depth in its own process: Django is set up once per database.
        argv = [sys.executable, __file__, "--child", str(depth), *sys.argv[1:]]
        out = subprocess.run(argv, check=True, capture_output=True, text=True, env=os.environ)
        for line in out.stdout.splitlines():
            if line.startswith("RATE "):
                rates[depth] = tuple(float(figure) for figure in line.split()[1:])
            else:
                print(line)
    shallow, deep = min(rates), max(rates)
    print(f"claims/s at {deep} against {shallow}: {rates[deep][0] / rates[shallow][0]:.2f}x")
    if rates[shallow][1]:
        ratio = rates[deep][1] / rates[shallow][1]
        print(f"one tick's deliveries/s at {deep} against {shallow}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
