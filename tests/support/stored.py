"""Everything the database holds, for tests that look for what must not be stored."""

from collections.abc import Iterator

from django.db import connection


def stored_values() -> Iterator[tuple[str, str]]:
    """Every value of every column of every table, as (table, text)."""
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, memoryview | bytes):
                        value = bytes(value).decode("utf-8", "replace")
                    yield table, str(value)
