from django.apps import AppConfig


class DbqueueConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "dbqueue"
    verbose_name = "Queue machinery"
