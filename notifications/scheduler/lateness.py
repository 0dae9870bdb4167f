"""How late the scheduler runs: the lateness histogram a tick adds to the totals, and the
due rows a tick leaves behind when it stops before the queue is empty."""

from datetime import datetime

from dbqueue.totals import Histogram
from notifications.models import Notification

# The lateness bands, in seconds: the one definition used by /metrics' histogram buckets,
# the admin's queue-health figures and the TickworkDeliveriesLate alert, whose threshold is
# one of them (operations/monitoring/prometheus/alerts.yml). On time first (a tick a minute
# starts up to 60 s after a row is due), then the ranges that tell "a slow tick" from
# "falling behind" from "stalled". Lateness past the last band reads as the last band, as
# in Prometheus.
LATENESS_BOUNDS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def lateness_histogram() -> Histogram:
    """The `lateness` histogram of channel attempts (counters `lateness_le_<s>`, …)."""
    return Histogram(name="lateness", bounds=LATENESS_BOUNDS_S)


def due_rows_left(*, now: datetime) -> int:
    """Rows that are due at `now` and not claimed: what a tick that stopped on its time
    budget or row cap left for the next one. One COUNT over the due index's range; call it
    only then (a tick that stopped because nothing was due left 0)."""
    return Notification.objects.due(now=now).count()
