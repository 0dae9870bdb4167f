from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_save


class NotificationsConfig(AppConfig):
    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tenancy.models import Tenant

        post_save.connect(_seed_event_types, sender=Tenant, dispatch_uid="seed_event_types")


def _seed_event_types(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    # Every tenant has the product's own event types from its first moment.
    if created and not kwargs.get("raw"):
        from notifications.event_types import event_types_seed

        event_types_seed([instance.pk])
