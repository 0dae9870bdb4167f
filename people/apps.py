from django.apps import AppConfig


class PeopleConfig(AppConfig):
    """Recipients, their preferences and send windows, digests and unsubscribe."""

    name = "people"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from delivery.hooks import register_on_claimed
        from people.sending import on_claimed

        register_on_claimed(on_claimed)
