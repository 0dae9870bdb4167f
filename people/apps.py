from django.apps import AppConfig


class PeopleConfig(AppConfig):
    """Recipients, their preferences and send windows, digests and unsubscribe."""

    name = "people"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from delivery.hooks import register_on_claimed
        from delivery.outbox import register_digest_joiner
        from delivery.validation import register_recipient_directory
        from people.digests import digest_join
        from people.recipients import unknown_keys
        from people.sending import on_claimed

        register_on_claimed(on_claimed)
        register_recipient_directory(unknown_keys)
        register_digest_joiner(digest_join)
