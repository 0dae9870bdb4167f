from django.apps import AppConfig
from django.db.backends.signals import connection_created


class DbqueueConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "dbqueue"
    verbose_name = "Queue machinery"

    def ready(self) -> None:
        from dbqueue.timestamps import use_psycopg_timestamp_loader

        connection_created.connect(use_psycopg_timestamp_loader, dispatch_uid=__name__)
