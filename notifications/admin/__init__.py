"""Support staff's view of the queue: notifications, webhook endpoints, the delivery log,
messages and event types, recipients and their digests. Signing secrets are never shown."""

from notifications.admin import deliveries, endpoints, messages, notifications, people

__all__ = ["deliveries", "endpoints", "messages", "notifications", "people"]
