"""The conflicts a notification's services refuse a change with (409): the row is being
delivered, or its state does not allow the move asked for."""

from web.errors import Conflict


class NotificationClaimed(Conflict):
    """run_tick holds the row right now (or claimed it while the change was being made);
    retry once its lease has ended."""

    kind = "notification-claimed"

    def __init__(self) -> None:
        super().__init__(
            "The notification is being delivered right now; try again when the delivery ends."
        )


class NotificationNotParked(Conflict):
    """Only a parked or dead-lettered notification can be retried from the admin."""

    kind = "notification-not-retryable"

    def __init__(self) -> None:
        super().__init__("Only a parked or dead-lettered notification can be retried.")


class NotificationHealthy(Conflict):
    """Retry is for a failing row: a scheduled (or completed) one is left as it is, since
    retrying is not "fire now"."""

    kind = "notification-not-retryable"

    def __init__(self, state: str) -> None:
        super().__init__(
            "Only a dead-lettered, backing-off or parked notification can be retried; "
            f"this one is {state}."
        )
        self.state = state


class EndpointDeleted(Conflict):
    """The row's webhook channel has no endpoint left to deliver to: retrying would only
    dead-letter it again."""

    kind = "webhook-endpoint-deleted"

    def __init__(self) -> None:
        super().__init__(
            "The notification's webhook endpoint was deleted, so a retry would fail again. "
            "Give it another endpoint (PATCH webhook_endpoint) first, or delete it."
        )


class EndpointDisabled(Conflict):
    """What the request would queue for the endpoint (a recovery, a resend, a new
    notification) would only be parked while the endpoint is disabled."""

    kind = "webhook-endpoint-disabled"

    def __init__(
        self,
        detail: str = (
            "The webhook endpoint is disabled, so the deliveries a recovery queues again would "
            "only be parked. Enable it first (PATCH disabled: false), then recover the window."
        ),
    ) -> None:
        super().__init__(detail)


class NotificationFinished(Conflict):
    """A completed or dead-lettered notification is finished: no PATCH schedules it again
    (its sends were counted once; retry a dead letter, or create a new notification)."""

    kind = "notification-completed"

    def __init__(self) -> None:
        super().__init__(
            "This notification is finished (completed or dead-lettered): its schedule cannot "
            "change. Create a new notification, or retry a dead-lettered one."
        )


class ScheduleFinished(Conflict):
    """The recurring schedule has no occurrence left to resume at."""

    kind = "schedule-finished"

    def __init__(self) -> None:
        super().__init__("The recurring schedule has no occurrence left to resume at.")


class MessageDelivery(Conflict):
    """The row delivers a message to one endpoint: it belongs to the message, whose resend
    and recovery are the way to act on it. Editing, retrying or deleting it here would
    re-arm it outside the message's history (a rule would send the message daily)."""

    kind = "message-delivery"

    def __init__(self, *, message_id: object, endpoint_id: object) -> None:
        super().__init__(
            "This notification delivers message "
            f"{message_id} to a webhook endpoint and belongs to the message: it is not "
            "edited, retried or deleted here. Resend the message to the endpoint (POST "
            "/v1/messages/{message_id}/endpoints/{endpoint_id}/resend) or recover the "
            "endpoint (POST /v1/webhook-endpoints/{endpoint_id}/recover)."
        )
        self.members = {
            "message_id": str(message_id),
            "endpoint_id": None if endpoint_id is None else str(endpoint_id),
        }
