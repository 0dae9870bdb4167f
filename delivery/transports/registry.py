"""The channels a queued send can name, one transport module each, as Healthchecks'
transports: a new channel is a module of this package and a line in TRANSPORTS.

A transport module says its CHANNEL, builds the `messages` a claimed row sends over it now
by unit (the channel itself, or each recipient's copy of an email: delivery.copies), each a
message or a ready result when no call can help, and gives the `sender` that sends one
message and never raises. The scheduler knows channels only through this table (the e-mail
batches of Resend and the webhooks' endpoint gate are lanes of their own,
delivery.scheduler.lanes).
"""

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from delivery.transports import email, webhook
from delivery.transports.base import DeliveryResult
from outbound.connections import Connections

if TYPE_CHECKING:
    from delivery.models import Notification, WebhookEndpoint


class Transport(Protocol):
    CHANNEL: str

    def messages(
        self,
        notification: "Notification",
        *,
        endpoint: "WebhookEndpoint | None",
        now: datetime,
        deferred: Mapping[str, Any],
    ) -> Mapping[str, Any]: ...

    def sender(self, connections: Connections | None) -> Callable[..., DeliveryResult]: ...


TRANSPORTS: dict[str, Transport] = {
    email.CHANNEL: email,
    webhook.CHANNEL: webhook,
}
