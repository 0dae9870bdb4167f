"""What the row lane knows of the webhook endpoints its rows go to: their rows, loaded once a
tick (again after a 410), and their circuits as the database has them, handed to the gate;
what a delivery's outcome means for its endpoint."""

from datetime import datetime
from typing import Any

from django.db import DatabaseError

from notifications.circuits import Signal, circuit_of
from notifications.models import Channel, Notification, WebhookEndpoint
from notifications.scheduler.context import Tick
from notifications.scheduler.deliver import RowDelivery, pending_channels
from notifications.scheduler.gate import EndpointGate
from outbound.categories import ErrorCategory


class Endpoints:
    """The webhook endpoints of one tick's row lane."""

    def __init__(self, tick: Tick, gate: EndpointGate) -> None:
        self.tick, self.gate = tick, gate
        self.rows: dict[Any, WebhookEndpoint] = {}

    def load(self, ids: set) -> bool:
        """The endpoints' rows: one query for those this tick has not loaded yet, their
        circuits as the database has them. False when the connection was lost."""
        missing = ids - self.rows.keys()
        if not missing:
            return True
        try:
            loaded = WebhookEndpoint.objects.in_bulk(missing)
        except DatabaseError as exc:
            if self.tick.lose(exc):
                return False
            raise
        self.rows.update(loaded)
        for endpoint in loaded.values():
            self.gate.know(endpoint.pk, circuit_of(endpoint))
        return True

    def get(self, endpoint_id: Any) -> WebhookEndpoint | None:
        return self.rows.get(endpoint_id)

    def settled(self, delivery: RowDelivery) -> None:
        """Reload from the database, for later rows, an endpoint that answered 410."""
        webhook = delivery.results.get(Channel.WEBHOOK)
        if webhook is not None and webhook.gone:
            self.rows.pop(delivery.notification.webhook_endpoint_id, None)

    def finished(
        self, endpoint_id: Any, delivery: RowDelivery | None, *, now: datetime
    ) -> tuple[Any, Signal] | None:
        """A delivery to the endpoint is back (None: it broke): its slot here is free again
        and the attempt applies to the circuit; its news for the circuit, if any, for the
        row's write-back."""
        result = delivery.results.get(Channel.WEBHOOK) if delivery is not None else None
        signal = self.gate.finish(
            endpoint_id,
            ok=result is not None and result.ok,
            category=result.category if result is not None else ErrorCategory.INTERNAL,
            now=now,
            backpressure=result is not None and result.backpressure,
            seconds=result.duration_ms / 1000 if result is not None else None,
        )
        return (endpoint_id, signal) if signal is not None else None

    def of(self, row: Notification) -> WebhookEndpoint | None:
        """The endpoint whose slot the row's webhook would take (None when it sends no
        webhook now, or the endpoint cannot be called anyway)."""
        if Channel.WEBHOOK not in pending_channels(row):
            return None
        endpoint = self.rows.get(row.webhook_endpoint_id)
        return endpoint if endpoint is not None and endpoint.enabled else None
