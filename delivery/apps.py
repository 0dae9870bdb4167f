from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    """The delivery engine: the queued send, the delivery log, transports and run_tick.
    It knows no product: products observe it through delivery.hooks."""

    name = "delivery"
    default_auto_field = "django.db.models.BigAutoField"
