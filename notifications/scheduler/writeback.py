"""Apply a batch of row plans: a few short, fenced statements in one transaction.

One fenced UPDATE per shape of change (finished rows too: they are kept, completed), one bulk
insert for the delivery log (attempts are written even for fenced-out rows: the calls
happened; a `skipped` record only when its row's write-back applied, since the row that
reclaimed it will skip those occurrences itself), one UPDATE disabling endpoints that
answered 410, and — only when a webhook attempt changed what its endpoint's circuit
knows — one locked read and one bulk update of those endpoints. No network I/O happens here.
"""

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from dbqueue.fences import fenced_update_many
from notifications import circuits
from notifications.circuits import circuit_of
from notifications.models import Delivery, Notification, WebhookEndpoint
from notifications.scheduler.plan import RowPlan

logger = logging.getLogger("notifications.scheduler")

GONE_REASON = "endpoint answered 410 Gone"
CIRCUIT_FIELDS = [
    "consecutive_failures",
    "circuit_open_until",
    "circuit_interval_seconds",
    "last_failure_at",
]


def write_back(
    plans: Sequence[RowPlan], *, now: datetime, circuit_failures: int | None = None
) -> list[RowPlan]:
    """Apply `plans` and return those that were fenced out (their row was reclaimed after
    our lease ran out, so their outcome was dropped). Each is logged as
    `fenced out on <branch> for row <id>, claim_token=<t>`."""
    if not plans:
        return []
    with transaction.atomic():
        applied = fenced_update_many(Notification, [(p.pk, p.token, p.changes) for p in plans])
        logs = [log for plan in plans for log in plan.logs]
        logs += [p.skipped for p in plans if p.skipped is not None and p.pk in applied]
        if logs:
            Delivery.objects.bulk_create(logs)
        gone = {p.gone_endpoint_id for p in plans if p.gone_endpoint_id is not None}
        if gone:
            WebhookEndpoint.objects.filter(pk__in=gone).update(
                enabled=False, disabled_reason=GONE_REASON, updated_at=now
            )
        signals = [p.endpoint_signal for p in plans if p.endpoint_signal and p.pk in applied]
        if signals:
            threshold = circuit_failures or settings.WEBHOOK_CIRCUIT_FAILURES
            record_circuits(signals, now=now, threshold=threshold)
    fenced = [p for p in plans if p.pk not in applied]
    for plan in fenced:
        logger.warning(
            "fenced out on %s for row %s, claim_token=%s", plan.branch.value, plan.pk, plan.token
        )
    return fenced


def record_circuits(
    signals: Sequence[tuple[Any, circuits.Signal]], *, now: datetime, threshold: int
) -> None:
    """Apply the attempts' signals to their endpoints' circuits as the database has them
    (locked, so ticks on several machines add up rather than overwrite each other). Only
    write-backs that were not fenced out count: a stale attempt says nothing."""
    endpoints = WebhookEndpoint.objects.select_for_update().in_bulk({e for e, _ in signals})
    for endpoint_id, signal in signals:
        endpoint = endpoints.get(endpoint_id)
        if endpoint is None:
            continue
        circuit = circuits.after(circuit_of(endpoint), signal, now=now, threshold=threshold)
        endpoint.consecutive_failures = circuit.consecutive_failures
        endpoint.circuit_open_until = circuit.open_until
        endpoint.circuit_interval_seconds = circuit.interval_seconds
        endpoint.last_failure_at = circuit.last_failure_at
    WebhookEndpoint.objects.bulk_update(list(endpoints.values()), CIRCUIT_FIELDS)
