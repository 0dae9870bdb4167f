"""Whether a queue row's lease is running, written once for every queue: as a filter for
the database and as a test of a row already read. A lease runs through its last instant
(`claimed_until >= now`); a row without one, or whose lease ended, is free to claim."""

from datetime import datetime

from django.db.models import Q


def lease_free(*, now: datetime) -> Q:
    """Rows no worker holds at `now`: never claimed, released, or their lease ran out."""
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def lease_running(*, now: datetime) -> Q:
    """Rows a worker holds at `now` (in flight)."""
    return Q(claimed_until__gte=now)


def is_lease_running(claimed_until: datetime | None, *, now: datetime) -> bool:
    return claimed_until is not None and claimed_until >= now
