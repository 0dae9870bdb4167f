"""A webhook endpoint's circuit breaker: its rules, as pure functions (no database, no I/O),
and whether a circuit is open, written once: as a filter for the database and as a test of a
value already read. The model, the queue figures and the scheduler all use it.

After `threshold` consecutive transport failures (timeout, connection error, 5xx) the circuit
opens for an interval that starts at a minute and doubles up to an hour each time it opens
again without a success in between. While open (until `circuit_open_until`), deliveries to
the endpoint are deferred without an attempt. When the interval ends (at that instant) the
circuit is half-open: one delivery probes it; a success closes it (and resets the interval),
a failure opens it again for longer. Any answer that is not a 5xx proves the endpoint alive
and closes it too.

Beside the circuit, the endpoint's health counts its failed deliveries since the last
success, whatever failed them: a 3xx or 4xx answer keeps the circuit closed (the endpoint
is up) but is a failed delivery all the same, so an endpoint refusing everything reads
`failing`, never `healthy`. `failing_since` is when the first of those failed deliveries
ended: an endpoint failing for ENDPOINT_DISABLE_AFTER_HOURS since then, with no success in
between, is retired (`retires`; the tick's write-back disables it).
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.db.models import Q

from outbound.categories import ErrorCategory


def circuit_open(*, now: datetime) -> Q:
    """Endpoints whose circuit is open at `now`."""
    return Q(circuit_open_until__gt=now)


def is_circuit_open(open_until: datetime | None, *, now: datetime) -> bool:
    return open_until is not None and open_until > now


FIRST_INTERVAL_SECONDS = 60
LONGEST_INTERVAL_SECONDS = 3600
TRANSPORT_FAILURES = frozenset(
    {ErrorCategory.TIMEOUT, ErrorCategory.CONNECTION, ErrorCategory.HTTP_5XX}
)


class Signal(Enum):
    """What one delivery attempt says about its endpoint."""

    ALIVE = "alive"  # answered 2xx
    REJECTED = "rejected"  # answered, but refused the delivery (3xx, 4xx)
    FAILED = "failed"  # a transport failure


def signal_of(*, ok: bool, category: str, backpressure: bool = False) -> Signal | None:
    """ALIVE for a success, REJECTED for a 3xx or 4xx answer (alive, but the delivery
    failed), FAILED for a transport failure, None when the attempt says nothing about the
    endpoint (a blocked address, an internal error, or a push-back: busy is not down)."""
    if backpressure:
        return None
    if ok:
        return Signal.ALIVE
    if category in (ErrorCategory.HTTP_3XX, ErrorCategory.HTTP_4XX):
        return Signal.REJECTED
    if category in TRANSPORT_FAILURES:
        return Signal.FAILED
    return None


@dataclass(frozen=True)
class Circuit:
    consecutive_failures: int = 0
    open_until: datetime | None = None
    interval_seconds: int = 0
    last_failure_at: datetime | None = None
    # Failed deliveries since the last success, a 3xx or 4xx answer included.
    failed_deliveries: int = 0
    # When the first of them ended (None while there is none).
    failing_since: datetime | None = None

    def is_open(self, now: datetime) -> bool:
        return is_circuit_open(self.open_until, now=now)

    def is_half_open(self, now: datetime, *, threshold: int) -> bool:
        """The open interval is over but no delivery has proved the endpoint alive yet."""
        return self.consecutive_failures >= threshold and not self.is_open(now)

    @property
    def healthy(self) -> bool:
        return (
            self.consecutive_failures == 0
            and self.open_until is None
            and self.failed_deliveries == 0
        )


def after(circuit: Circuit, signal: Signal, *, now: datetime, threshold: int) -> Circuit:
    """The circuit once an attempt that ended at `now` gave `signal`."""
    closed = replace(circuit, consecutive_failures=0, open_until=None, interval_seconds=0)
    if signal is Signal.ALIVE:
        return replace(closed, failed_deliveries=0, failing_since=None)
    failed_deliveries = circuit.failed_deliveries + 1
    failing_since = circuit.failing_since or now
    if signal is Signal.REJECTED:
        return replace(
            closed,
            failed_deliveries=failed_deliveries,
            last_failure_at=now,
            failing_since=failing_since,
        )
    failures = circuit.consecutive_failures + 1
    if failures < threshold or circuit.is_open(now):
        return replace(
            circuit,
            consecutive_failures=failures,
            last_failure_at=now,
            failed_deliveries=failed_deliveries,
            failing_since=failing_since,
        )
    interval = min(
        LONGEST_INTERVAL_SECONDS, max(FIRST_INTERVAL_SECONDS, circuit.interval_seconds * 2)
    )
    return Circuit(
        consecutive_failures=failures,
        open_until=now + timedelta(seconds=interval),
        interval_seconds=interval,
        last_failure_at=now,
        failed_deliveries=failed_deliveries,
        failing_since=failing_since,
    )


def retires(circuit: Circuit, *, now: datetime, after_hours: float) -> bool:
    """Whether an endpoint with this circuit has failed every delivery for `after_hours`
    (no success in between): it is then disabled rather than burn attempts for ever."""
    since = circuit.failing_since
    return since is not None and now - since >= timedelta(hours=after_hours)


def circuit_of(endpoint: Any) -> Circuit:
    """The circuit a webhook endpoint row records."""
    return Circuit(
        consecutive_failures=endpoint.consecutive_failures,
        open_until=endpoint.circuit_open_until,
        interval_seconds=endpoint.circuit_interval_seconds,
        last_failure_at=endpoint.last_failure_at,
        failed_deliveries=endpoint.failed_deliveries,
        failing_since=endpoint.failing_since,
    )
