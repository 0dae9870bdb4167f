"""Digests: many events gathered into one email per recipient and key.

A notification created with `digest: {key, window_seconds}` does not go out on its own: it
joins the recipient's open digest for that key (`digest_join`), one upsert (INSERT … ON
CONFLICT DO UPDATE on the open row of (tenant, recipient, key)) that counts the event and
keeps it while fewer than MAX_SHOWN are kept, so parallel joins never make two rows or
lose an event. The join that opens a digest also creates, in the same transaction, the
one-shot email notification that delivers it, due when the window closes: the tick
claims, leases, fences, retries and logs it like any other row. When the tick claims it
(`rendered`), the digest is closed (the next join opens a new one) and the email's
body is rendered from its items: the first MAX_SHOWN and "and N more"; its subject says it
is a digest: the subject its key was given, or the count and the first events' subjects
(`digest_subject`). A retry renders the same closed digest, the same bytes.
"""

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import django
from django.db import connection, transaction

from dbtools.fields import concrete_field
from delivery.models import Channel, Notification
from delivery.outbox import one_shot_due, put
from people.models import Digest
from tenancy.models import Tenant

# Events an email lists, and so the events a digest keeps (all are counted): every join
# rewrites the row, so a window of a noisy key must stay one small row.
MAX_SHOWN = 10
_ITEM_BODY_CHARS = 500
# How much of the events' subjects a digest's default subject lists: with the count, it
# stays well within a notification's subject (200).
_LISTED_SUBJECT_CHARS = 150

# SQLite takes an upsert's conflict target only where its WHERE repeats the partial unique
# index's predicate, and Django 6.1 writes a boolean condition there as `"is_open" = 1`
# (5.2: `"is_open"`), in the index it creates as in any query.
_SQLITE_OPEN = '"is_open" = 1' if django.VERSION >= (6, 1) else "is_open"

_JOIN = {
    "postgresql": """
        INSERT INTO notifications_digest AS d
            (id, tenant_id, recipient_key, "key", items, "count", is_open, closes_at,
             notification_id, created_at, updated_at, subject)
        VALUES (%s, %s, %s, %s, %s::jsonb, 1, true, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, recipient_key, "key") WHERE is_open
        DO UPDATE SET
            items = CASE WHEN jsonb_array_length(d.items) < %s
                THEN d.items || EXCLUDED.items ELSE d.items END,
            "count" = d."count" + 1,
            subject = CASE WHEN EXCLUDED.subject <> '' THEN EXCLUDED.subject ELSE d.subject END,
            updated_at = EXCLUDED.updated_at
        RETURNING notification_id
    """,
    "sqlite": f"""
        INSERT INTO notifications_digest AS d
            (id, tenant_id, recipient_key, "key", items, "count", is_open, closes_at,
             notification_id, created_at, updated_at, subject)
        VALUES (%s, %s, %s, %s, %s, 1, 1, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, recipient_key, "key") WHERE {_SQLITE_OPEN}
        DO UPDATE SET
            items = CASE WHEN json_array_length(d.items) < %s
                THEN json_insert(d.items, '$[#]', json(json_extract(excluded.items, '$[0]')))
                ELSE d.items END,
            "count" = d."count" + 1,
            subject = CASE WHEN excluded.subject <> '' THEN excluded.subject ELSE d.subject END,
            updated_at = excluded.updated_at
        RETURNING notification_id
    """,  # noqa: S608 (a constant of this module's)
}


def _prep(field: str, value: Any) -> Any:
    return concrete_field(Digest, field).get_db_prep_value(value, connection)


def digest_join(
    *,
    tenant: Tenant,
    recipient_key: str,
    key: str,
    window_seconds: int,
    subject: str,
    body: str,
    category: str,
    now: datetime,
    digest_subject: str = "",
) -> Notification:
    """Add one event to the recipient's open digest for `key` (opening it, with the email
    notification that delivers it when `window_seconds` have passed, when none is open);
    a `digest_subject` becomes the digest's subject. Returns that notification."""
    proposed = uuid.uuid4()
    closes_at = now + timedelta(seconds=window_seconds)
    item = json.dumps([{"subject": subject, "body": body[:_ITEM_BODY_CHARS]}])
    params = [
        _prep("id", uuid.uuid4()),
        _prep("tenant", tenant.pk),
        recipient_key,
        key,
        item,
        _prep("closes_at", closes_at),
        _prep("notification", proposed),
        _prep("created_at", now),
        _prep("updated_at", now),
        digest_subject,
        MAX_SHOWN,
    ]
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_JOIN[connection.vendor], params)
            (returned,) = cursor.fetchone()
        notification_id = Digest._meta.get_field("notification").to_python(returned)
        if notification_id == proposed:
            delivers = one_shot_due(
                closes_at,
                now=now,
                id=proposed,
                tenant=tenant,
                channels=[Channel.EMAIL],
                recipients=[recipient_key],
                category=category,
                subject=subject,
                digest_key=key,
            )
            put([delivers])
            return delivers
    return Notification.objects.get(pk=notification_id)


@dataclass(frozen=True)
class RenderedDigest:
    """A closed digest's email: its subject and its listing."""

    subject: str
    body: str


def rendered(rows: Iterable[Notification], *, now: datetime) -> dict[Any, RenderedDigest]:
    """Close the digests the claimed `rows` deliver (no event joins them any more) and
    answer each one's email, its subject and its listing, by row id."""
    ids = [row.pk for row in rows if row.digest_key]
    if not ids:
        return {}
    Digest.objects.filter(notification_id__in=ids, is_open=True).update(
        is_open=False, updated_at=now
    )
    return {
        digest.notification_id: RenderedDigest(
            subject=digest_subject(digest.items, count=digest.count, subject=digest.subject),
            body=digest_body(digest.items, count=digest.count),
        )
        for digest in Digest.objects.filter(notification_id__in=ids).only(
            "items", "count", "subject", "notification_id"
        )
    }


def digest_subject(items: Sequence[dict[str, str]], *, count: int, subject: str) -> str:
    """The email's subject: the key's subject with the count ("Your week (3 updates)"),
    or by default the count and the first events' subjects, cut to a bounded length
    ("3 updates: Comment 1, Comment 2, Comment 3"; "12 updates: Comment 1, …")."""
    updates = f"{count} update" + ("" if count == 1 else "s")
    if subject:
        return f"{subject} ({updates})"
    subjects = [item.get("subject", "") for item in items[:MAX_SHOWN]]
    listed = ", ".join(subjects)
    if len(listed) > _LISTED_SUBJECT_CHARS:
        listed = listed[: _LISTED_SUBJECT_CHARS - 1].rstrip(", ") + "…"
    elif count > len(subjects):
        listed += ", …"
    return f"{updates}: {listed}"


def digest_body(items: Sequence[dict[str, str]], *, count: int) -> str:
    """The email listing the first MAX_SHOWN events and how many more there were."""
    lines = []
    for item in items[:MAX_SHOWN]:
        lines.append(f"- {item.get('subject', '')}")
        if item.get("body"):
            lines.append(f"  {item['body']}")
    if count > MAX_SHOWN:
        lines.append(f"and {count - MAX_SHOWN} more")
    return "\n".join(lines)
