"""The notifications' rows retention may delete, each named with why it may lose them;
operations.retention decides when and deletes them."""

from datetime import datetime

from django.db.models import QuerySet

from delivery.models import Delivery, EmailBatch, Notification
from delivery.states import NotificationState


def email_batches_before(*, before: datetime) -> QuerySet[EmailBatch]:
    """The records of Resend batches composed before `before`, which retention may delete:
    past Resend's 24 h idempotency window a record no longer prevents anything; a row still
    naming one (parked on it) sends its email in a new batch."""
    return EmailBatch.objects.filter(created_at__lt=before)


def notifications_completed_before(*, before: datetime) -> QuerySet[Notification]:
    """Completed notifications whose last occurrence fired before `before`, which retention
    may delete with the delivery log of that age: until then a client can still read them.
    A row on its schedule, dead-lettered or parked is never among them."""
    return Notification.objects.filter(state=NotificationState.COMPLETED, last_fired_at__lt=before)


def deliveries_before(*, before: datetime) -> QuerySet[Delivery]:
    """Delivery-log rows attempted before `before`, which retention may delete: the log is
    history only, no notification depends on it."""
    return Delivery.objects.filter(attempted_at__lt=before)
