from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_save


class WebhooksConfig(AppConfig):
    """Event types, messages, endpoints' lifecycle and recovery."""

    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from delivery.hooks import register_after_write_back, register_on_claimed
        from delivery.outbox import register_event_publisher
        from jobs.registry import register
        from tenancy.members import member_removed
        from tenancy.models import Tenant
        from webhooks.lifecycle import after_write_back
        from webhooks.messages import MessagePublisher, payloads_for_claimed
        from webhooks.portal import schema  # noqa: F401  (registers the portal's bearer)
        from webhooks.recovery import RECOVER, RECOVER_KIND

        post_save.connect(_seed_event_types, sender=Tenant, dispatch_uid="seed_event_types")
        member_removed.connect(_member_removed, dispatch_uid="member_removed_event")
        register(RECOVER_KIND, RECOVER)
        register_after_write_back(after_write_back)
        register_on_claimed(payloads_for_claimed)
        register_event_publisher(MessagePublisher())


def _seed_event_types(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    # Every tenant has the product's own event types from its first moment.
    if created and not kwargs.get("raw"):
        from webhooks.event_types import event_types_seed

        event_types_seed([instance.pk])


def _member_removed(sender: Any, membership: Any, **kwargs: Any) -> None:
    from webhooks.messages import product_event_publish

    product_event_publish(
        tenant_id=membership.tenant_id,
        event_type="member.removed",
        data={
            "tenant_id": str(membership.tenant_id),
            "user_id": membership.user_id,
            "email": membership.user.email,
        },
    )
