from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """The scheduled-notification API: one-shot and recurring notifications."""

    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"
