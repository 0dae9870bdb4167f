"""Fan-out of messages (README: "Sending webhooks to your customers"). Prints figures;
never judges.

    .venv/bin/python bench/fanout.py [--db sqlite|postgres|both] [--endpoints 100]
        [--posts 20] [--messages 200] [--per-message 10] [--tenants 20]
        [--applications 1000] [--per-application 10] [--app-messages 200]

- api: POST /v1/messages (through the Django test client, token authentication and all) to
  one tenant with --endpoints enabled endpoints, --posts times: the median time of one
  request, its SQL statements and the INSERT statements per table.
- drain: --messages messages over --tenants tenants of --per-message endpoints each, published
  through the service, then drained by back-to-back run_tick passes against a local receiver
  (bench/tick_sink.py): publish time per message, time to drain, deliveries/s and SQL
  statements per delivered row; then the same number of plain webhook notifications drained
  the same way, for comparison.
- applications: one tenant with --applications applications of --per-application endpoints
  each (and 10 endpoints of its own), --app-messages messages each addressed to a single
  application, published through the service: SQL statements per publish beside a publish
  to the tenant's own endpoints (the same statements are expected), the statements of
  POST /v1/messages naming an application, then the drain beside the same number of plain
  webhook notifications.

Each database runs in its own process against a fresh database: a SQLite file in the
temporary directory, or BENCH_FANOUT_URL (default
postgres://postgres@127.0.0.1:5432/bench_fanout), which is DROPPED and re-created.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402
from bench.load_tick import arrivals, start_recording_sink  # noqa: E402

# A type of the tenant's own: the product's types are the product's to publish.
API_EVENT_TYPE = "bench.published"
PG_DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_fanout"
_INSERT_INTO = re.compile(r'INSERT\b.*?\bINTO "?(\w+)')


def _endpoints(tenant, url: str, count: int, application_id=None) -> None:
    from delivery.models import WebhookEndpoint
    from delivery.transports.signing import generate_secret

    WebhookEndpoint.objects.bulk_create(
        [
            WebhookEndpoint(
                tenant=tenant, url=url, secret=generate_secret(), application_id=application_id
            )
            for _ in range(count)
        ],
        batch_size=1000,
    )


def api_cost(db: str, *, endpoints: int, posts: int, url: str) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tenancy.models import ApiToken, Membership, Role, Tenant
    from webhooks.event_types import event_type_create

    tenant = Tenant.objects.create(name="fan-out")
    user = get_user_model().objects.create(username="bench", email="bench@example.com")
    Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)
    token = ApiToken.issue(user=user, name="bench")[1]
    _endpoints(tenant, url, endpoints)
    event_type_create(tenant=tenant, name=API_EVENT_TYPE)
    client = Client()
    headers = {"Authorization": f"Bearer {token}", "X-Tenant-ID": str(tenant.id)}
    body = {"event_type": API_EVENT_TYPE, "payload": {"bench": True, "items": list(range(20))}}
    times, statements, inserts = [], [], Counter()
    for _ in range(posts):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.post(
                "/v1/messages",
                body,
                content_type="application/json",
                headers={**headers, "Idempotency-Key": str(uuid.uuid4())},
            )
            times.append(time.perf_counter() - started)
        assert response.status_code == 202, response.content
        statements.append(len(captured.captured_queries))
        inserts = Counter(
            match.group(1)
            for query in captured.captured_queries
            if (match := _INSERT_INTO.match(query["sql"]))
        )
    print(
        f"[{db}] api: POST /v1/messages to {endpoints} endpoints: median "
        f"{1000 * statistics.median(times):.1f} ms, {statistics.median(statements):.0f} SQL "
        f"statements; INSERT statements per table: {dict(sorted(inserts.items()))}"
    )


def _drain(label: str, db: str, rows: int, log: Path) -> None:
    from django.db import connection

    from delivery.models import Notification
    from delivery.scheduler.tick import run_tick

    # Counted by a wrapper, not CaptureQueriesContext: Django keeps the last 9,000 only.
    statements = 0

    def count(execute, sql, params, many, context):
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    started, ticks, delivered, not_delivered = time.perf_counter(), 0, 0, 0
    with connection.execute_wrapper(count):
        while Notification.objects.filter(next_fire_at__isnull=False).exists() and ticks < 60:
            summary = run_tick()
            delivered += summary.delivered
            not_delivered += summary.backed_off + summary.dead_lettered + summary.errors
            ticks += 1
    drained = time.perf_counter() - started
    received = len(arrivals(log))
    print(
        f"[{db}] {label}: {rows} deliveries drained in {drained:.1f}s by {ticks} tick(s): "
        f"{delivered / max(drained, 1e-9):.0f} deliveries/s, "
        f"{statements / max(delivered, 1):.3f} SQL statements per delivered row "
        f"({delivered} delivered, {not_delivered} not, {received} received)"
    )


def _delete_all(model) -> None:
    """Every row of `model` and what cascades from it, in chunks: one delete of 100,000
    rows binds more parameters than PostgreSQL takes (65,535)."""
    ids = list(model.objects.values_list("pk", flat=True))
    for start in range(0, len(ids), 10_000):
        model.objects.filter(pk__in=ids[start : start + 10_000]).delete()


def drain(db: str, *, messages: int, per_message: int, tenants: int) -> None:

    from delivery.models import Notification
    from delivery.outbox import Event
    from tenancy.models import Tenant
    from webhooks.messages import messages_publish

    log = Path(tempfile.gettempdir()) / f"tw_bench_fanout_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        owners = [Tenant.objects.create(name=f"fan-out {n}") for n in range(tenants)]
        for tenant in owners:
            _endpoints(tenant, url, per_message)
        items = [
            Event(
                tenant_id=owners[n % tenants].id,
                event_type="project.active",
                payload={"n": n, "items": list(range(20))},
            )
            for n in range(messages)
        ]
        started = time.perf_counter()
        for item in items:
            messages_publish([item])
        published = time.perf_counter() - started
        rows = Notification.objects.count()
        print(
            f"[{db}] drain: {messages} messages x {per_message} endpoints over {tenants} tenants"
            f" published in {published:.1f}s ({1000 * published / messages:.2f} ms a message)"
        )
        _drain("messages", db, rows, log)
    finally:
        sink.kill()
        sink.wait()

    _plain_burst(db, rows)


def _plain_burst(db: str, rows: int) -> None:
    """`rows` plain webhook notifications over the endpoints there are, drained alike."""
    from django.utils import timezone

    from delivery.models import Notification

    log = Path(tempfile.gettempdir()) / f"tw_bench_fanout_plain_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        _delete_all(Notification)
        Notification._meta.get_field("webhook_endpoint").related_model.objects.update(url=url)
        due = timezone.now()
        endpoints = list(
            Notification._meta.get_field("webhook_endpoint")
            .related_model.objects.order_by("tenant_id")
            .values_list("tenant_id", "id")
        )
        Notification.objects.bulk_create(
            [
                Notification(
                    tenant_id=endpoints[n % len(endpoints)][0],
                    webhook_endpoint_id=endpoints[n % len(endpoints)][1],
                    channels=["webhook"],
                    subject="Load",
                    next_fire_at=due,
                    due_at=due,
                    recurrence_anchor=due,
                )
                for n in range(rows)
            ],
            batch_size=1000,
        )
        _drain("plain notifications", db, rows, log)
    finally:
        sink.kill()
        sink.wait()


def _publish_statements(items) -> tuple[float, float]:
    """The median SQL statements and milliseconds of one messages_publish per item."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from webhooks.messages import messages_publish

    statements, times = [], []
    for item in items:
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            messages_publish([item])
            times.append(time.perf_counter() - started)
        statements.append(len(captured.captured_queries))
    return statistics.median(statements), 1000 * statistics.median(times)


def applications_drain(
    db: str, *, applications: int, per_application: int, messages: int, posts: int
) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from delivery.models import Notification
    from delivery.outbox import Event
    from tenancy.models import ApiToken, Membership, Role, Tenant
    from webhooks.event_types import event_type_create
    from webhooks.models import Application, Message

    log = Path(tempfile.gettempdir()) / f"tw_bench_fanout_apps_{db}.log"
    log.unlink(missing_ok=True)
    sink, url = start_recording_sink(log)
    try:
        tenant = Tenant.objects.create(name="applications")
        _endpoints(tenant, url, per_application)
        made = Application.objects.bulk_create(
            [
                Application(tenant=tenant, uid=f"customer-{n}", name=f"Customer {n}")
                for n in range(applications)
            ],
            batch_size=1000,
        )
        for application in made:
            _endpoints(tenant, url, per_application, application_id=application.pk)
        payload = {"items": list(range(20))}
        own = [
            Event(tenant_id=tenant.id, event_type="project.active", payload=payload)
            for _ in range(20)
        ]
        own_statements, own_ms = _publish_statements(own)
        Notification.objects.all().delete()
        Message.objects.all().delete()
        addressed = [
            Event(
                tenant_id=tenant.id,
                event_type="project.active",
                payload={"n": n, **payload},
                application_id=made[(n * 7919) % applications].pk,
            )
            for n in range(messages)
        ]
        app_statements, app_ms = _publish_statements(addressed)
        rows = Notification.objects.count()
        print(
            f"[{db}] applications: {applications} applications x {per_application} endpoints; "
            f"a publish to one application: {app_statements:.0f} SQL statements, "
            f"{app_ms:.2f} ms; to the tenant's own {per_application} endpoints: "
            f"{own_statements:.0f} SQL statements, {own_ms:.2f} ms"
        )
        event_type_create(tenant=tenant, name=API_EVENT_TYPE)
        user = get_user_model().objects.create(username="apps", email="apps@example.com")
        Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)
        token = ApiToken.issue(user=user, name="bench")[1]
        headers = {"Authorization": f"Bearer {token}", "X-Tenant-ID": str(tenant.id)}
        counted = {}
        for label, extra in (("own", {}), ("application", {"application": "customer-17"})):
            counts = []
            for _ in range(posts):
                with CaptureQueriesContext(connection) as captured:
                    response = Client().post(
                        "/v1/messages",
                        {"event_type": API_EVENT_TYPE, "payload": payload, **extra},
                        content_type="application/json",
                        headers={**headers, "Idempotency-Key": str(uuid.uuid4())},
                    )
                assert response.status_code == 202, response.content
                counts.append(len(captured.captured_queries))
            counted[label] = statistics.median(counts)
        print(
            f"[{db}] applications: POST /v1/messages naming an application: "
            f"{counted['application']:.0f} SQL statements; without one: {counted['own']:.0f}"
        )
        rows = Notification.objects.count()
        _drain("messages to single applications", db, rows, log)
    finally:
        sink.kill()
        sink.wait()
    _plain_burst(db, rows)


def run_one(db: str, args: argparse.Namespace) -> None:
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_FANOUT_URL", PG_DEFAULT_URL)
    os.environ["BENCH_LOAD_SQLITE"] = str(Path(tempfile.gettempdir()) / "tw_bench_fanout.sqlite3")
    load.prepare_environment(db)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    log = Path(tempfile.gettempdir()) / f"tw_bench_fanout_api_{db}.log"
    sink, url = start_recording_sink(log)
    try:
        api_cost(db, endpoints=args.endpoints, posts=args.posts, url=url)
    finally:
        sink.kill()
        sink.wait()
    from delivery.models import Notification
    from webhooks.models import Message

    Notification.objects.all().delete()
    Message.objects.all().delete()
    try:
        drain(db, messages=args.messages, per_message=args.per_message, tenants=args.tenants)
        _delete_all(Notification)
        Message.objects.all().delete()
        applications_drain(
            db,
            applications=args.applications,
            per_application=args.per_application,
            messages=args.app_messages,
            posts=args.posts,
        )
    finally:
        load.drop(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--endpoints", type=int, default=100, help="api: endpoints")
    parser.add_argument("--posts", type=int, default=20, help="api: requests")
    parser.add_argument("--messages", type=int, default=200, help="drain: messages")
    parser.add_argument("--per-message", type=int, default=10, help="drain: endpoints each")
    parser.add_argument("--tenants", type=int, default=20, help="drain: tenants")
    parser.add_argument("--applications", type=int, default=1000, help="applications")
    parser.add_argument(
        "--per-application", type=int, default=10, help="applications: endpoints each"
    )
    parser.add_argument("--app-messages", type=int, default=200, help="applications: messages")
    args = parser.parse_args()
    if args.db != "both":
        run_one(args.db, args)
        return
    for db in ("sqlite", "postgres"):
        options = ["--endpoints", args.endpoints, "--posts", args.posts]
        options += ["--messages", args.messages, "--per-message", args.per_message]
        options += ["--tenants", args.tenants, "--applications", args.applications]
        options += ["--per-application", args.per_application]
        options += ["--app-messages", args.app_messages]
        subprocess.run([sys.executable, __file__, "--db", db, *map(str, options)], check=True)


if __name__ == "__main__":
    main()
