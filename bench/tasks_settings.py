"""Bench-only settings for bench/tasks.py: the production settings plus django-tasks-db (the
peer measured against, `pip install django-tasks-db`) as the task backend alias `db`."""

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]  # noqa: F405
TASKS = {
    "default": {"BACKEND": "jobs.tasks.OutboxBackend"},
    "db": {"BACKEND": "django_tasks_db.DatabaseBackend"},
}
