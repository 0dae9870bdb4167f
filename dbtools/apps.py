from django.apps import AppConfig
from django.db.backends.signals import connection_created


class DbtoolsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "dbtools"
    verbose_name = "Database tools"

    def ready(self) -> None:
        from dbtools.timestamps import use_psycopg_timestamp_loader

        connection_created.connect(use_psycopg_timestamp_loader, dispatch_uid=__name__)
