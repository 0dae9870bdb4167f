"""A notification's queue states as querysets: due rows, rows in flight, rows in a stored
state. run_tick's claim, the admin's filters, the API's `?state=` and the queue figures
are all built from them. And the delivery log of one message's deliveries."""

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from django.db import connection, models
from django.db.models.expressions import RawSQL

from dbqueue.leases import lease_free, lease_running
from delivery.states import CLAIMABLE, NotificationState

if TYPE_CHECKING:
    from delivery.models import Delivery, Notification  # noqa: F401 (the base classes name them)


class NotificationQuerySet(models.QuerySet["Notification"]):
    def due(self, *, now: datetime) -> "NotificationQuerySet":
        return (
            self.filter(_claimable_state(self.model))
            .filter(next_fire_at__lte=now, error_count__lt=models.F("max_attempts"))
            .filter(lease_free(now=now))
        )

    def on_schedule(self) -> "NotificationQuerySet":
        """The rows a due row is always among, now or later (the due indexes' condition)."""
        return self.filter(_claimable_state(self.model))

    def in_flight(self, *, now: datetime) -> "NotificationQuerySet":
        return self.filter(lease_running(now=now))

    def in_state(self, state: str) -> "NotificationQuerySet":
        """The rows whose stored `state` is `state` (a NotificationState); the API's
        `?state=` filter, the admin's filter and the queue figures all use this."""
        return self.filter(state=NotificationState(state))


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def of_message(self, *, tenant_id: UUID, message_id: UUID) -> "DeliveryQuerySet":
        """The log of the tenant's deliveries of one message: the rows of every notification
        naming it (one per endpoint, and those its resends queued), in one statement."""
        # Imported here: the models module imports this one.
        from delivery.models import Notification

        deliveries = Notification.objects.filter(tenant_id=tenant_id, message_id=message_id)
        return self.filter(tenant_id=tenant_id, notification_id__in=deliveries.values("id"))


def _claimable_state(model: type[models.Model]) -> RawSQL:
    """`state IN ('scheduled', 'backing_off')`, the due index's own condition, with the
    states as SQL literals: the planner uses a partial index only when it can prove that the
    query implies the index's condition, and it cannot see through bound parameters (a
    prepared statement's generic plan on PostgreSQL, SQLite's planner)."""
    quote = connection.ops.quote_name
    states = ", ".join(f"'{state.value}'" for state in CLAIMABLE)
    column = f"{quote(model._meta.db_table)}.{quote('state')}"
    # Only the model's own names and the states above: no input reaches this SQL.
    return RawSQL(f"{column} IN ({states})", [], output_field=models.BooleanField())  # noqa: S611
