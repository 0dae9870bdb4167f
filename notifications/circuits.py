"""Whether a webhook endpoint's circuit is open, written once: as a filter for the database
and as a test of a value already read. Open means its deliveries are deferred unattempted
until `circuit_open_until`; at that instant the circuit is half-open (scheduler.breaker)."""

from datetime import datetime

from django.db.models import Q


def circuit_open(*, now: datetime) -> Q:
    """Endpoints whose circuit is open at `now`."""
    return Q(circuit_open_until__gt=now)


def is_circuit_open(open_until: datetime | None, *, now: datetime) -> bool:
    return open_until is not None and open_until > now
