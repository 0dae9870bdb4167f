from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs.registry import register
        from notifications.recovery import RECOVER, RECOVER_KIND

        register(RECOVER_KIND, RECOVER)
