"""Support staff's view of the queue: notifications, webhook endpoints, the delivery log.
Signing secrets are never shown."""

from notifications.admin import deliveries, endpoints, notifications

__all__ = ["deliveries", "endpoints", "notifications"]
