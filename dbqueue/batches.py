"""Deleting many rows without one long transaction."""

from django.db.models import QuerySet


def delete_in_batches(rows: QuerySet, *, batch_size: int) -> int:
    """Delete `rows` `batch_size` primary keys at a time, each batch its own short
    transaction, so a large purge never holds SQLite's write lock, or PostgreSQL row locks
    on a hot queue table, for long. Returns how many rows went."""
    deleted = 0
    while True:
        batch = list(rows.values_list("pk", flat=True)[:batch_size])
        if not batch:
            return deleted
        deleted += rows.model.objects.filter(pk__in=batch).delete()[0]
        if len(batch) < batch_size:
            return deleted
