"""Rows made once for a whole test module: the module's many cases share them instead of each
making its own."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction


@contextmanager
def rows_for_the_module(django_db_blocker) -> Iterator[None]:
    """Database access for a module-scoped fixture, inside a transaction around the module
    that is rolled back at its end. Each test still runs in a savepoint of its own
    (pytest-django's `db`), so what one test writes is gone before the next and every test
    starts from the rows made here."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)
