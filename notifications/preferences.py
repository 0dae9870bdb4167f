"""What recipients' preferences and send windows mean for a claimed row, at send time.

The tick calls `prepare` on the rows it claimed (one query for all their recipients) before
their channels go out. For a row that names recipients it sets, in memory only:
- `email_to`: the current addresses of the recipients who take this email;
- `email_headers`: the one-click unsubscribe headers, when the email goes to one recipient
  and its category is not critical (a token is one person's: an email to several carries
  none);
- `skipped_channels` (and `channel_state`): a channel every recipient opted out of, with
  the reason the delivery log shows, `preference` (`no_recipient` when none of the named
  recipients exists any more); it is never sent.
- `email_wait`: when the email may go, if a recipient's send window is closed now.

Categories named in CRITICAL_CATEGORIES ignore opt-outs.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connections, router

from dbtools.fields import concrete_field
from notifications import unsubscribe
from notifications.models import Channel, DeliveryOutcome, Notification, Recipient
from notifications.quiet_hours import common_opening

PREFERENCE = "preference"
NO_RECIPIENT = "no_recipient"
# What a skipped channel's `channel_state` holds: settled, neither delivered nor failed.
SKIPPED = DeliveryOutcome.SKIPPED.value


def allows(preferences: Mapping[str, Any], *, channel: str, category: str) -> bool:
    """Whether `preferences` let `channel` through for `category` (unset means yes)."""
    if preferences.get("channels", {}).get(channel) is False:
        return False
    return (
        not category
        or preferences.get("categories", {}).get(category, {}).get(channel) is not False
    )


def is_critical(category: str) -> bool:
    return bool(category) and category in settings.CRITICAL_CATEGORIES


# The claimed rows' recipients by (tenant, key) pairs, one round trip. Plain SQL rather than
# a queryset: this runs for every claim of rows naming recipients, and compiling an OR of
# per-tenant IN lists cost the tick four times what reading the rows did. The pairs go as
# one JSON text, on PostgreSQL too: dumping two typed arrays cost the driver more per pair;
# each pair is looked up through an index (LATERAL, kept a subquery by its LIMIT: the key
# is unique), never by a hash join over the whole table.
_PEOPLE = {
    "postgresql": """
        SELECT r.tenant_id, r."key", r.email, r.timezone, r.send_window, r.preferences
        FROM jsonb_array_elements(%s::jsonb) AS wanted
        CROSS JOIN LATERAL (
            SELECT * FROM notifications_recipient
            WHERE tenant_id = (wanted ->> 0)::uuid AND "key" = wanted ->> 1
            LIMIT 1
        ) AS r
    """,
    "sqlite": """
        SELECT r.tenant_id, r."key", r.email, r.timezone, r.send_window, r.preferences
        FROM json_each(%s) AS wanted
        JOIN notifications_recipient r
            ON r.tenant_id = json_extract(wanted.value, '$[0]')
            AND r."key" = json_extract(wanted.value, '$[1]')
    """,
}


def prepare(rows: Iterable[Notification], *, now: datetime) -> None:
    """Apply the recipients of each row that names some (see the module's docstring)."""
    rows = [row for row in rows if row.recipients]
    if not rows:
        return
    wanted = {(row.tenant_id, key) for row in rows for key in row.recipients}
    found = _people(sorted(wanted))
    opening_of = _openings(now)
    for row in rows:
        people = [found[key] for k in row.recipients if (key := (row.tenant_id, k)) in found]
        row.email_wait = _apply(row, people, opening_of=opening_of)


def _people(wanted: list[tuple[Any, str]]) -> dict[tuple[Any, str], "Person"]:
    """The recipients among `wanted` (tenant id, key) pairs that exist, by that pair."""
    connection = connections[router.db_for_read(Recipient)]
    tenant = concrete_field(Recipient, "tenant")
    pairs = [[str(tenant.get_db_prep_value(t, connection)), key] for t, key in wanted]
    with connection.cursor() as cursor:
        cursor.execute(_PEOPLE[connection.vendor], [json.dumps(pairs)])
        found = cursor.fetchall()
    decoded = _Decoded()
    return {
        (tenant.to_python(tenant_id), key): Person(
            key, email, zone, decoded(send_window), decoded(prefs) or {}
        )
        for tenant_id, key, email, zone, send_window, prefs in found
    }


class _Decoded(dict):
    """JSON columns as read by a cursor (text on SQLite and, through Django's loader, on
    PostgreSQL: the fields have no custom decoder), each distinct text decoded once: most
    recipients share a few windows and preferences. The values are shared, read only."""

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, (str, bytes)):
            return value
        if value not in self:
            self[value] = json.loads(value)
        return self[value]


def _openings(now: datetime) -> Callable[[list["Person"]], datetime | None]:
    """`common_opening` of people's windows at `now`, worked out once per distinct set of
    (window, zone): a claim's recipients mostly share a few."""
    known: dict[tuple, datetime | None] = {}

    def opening_of(people: list[Person]) -> datetime | None:
        shape = tuple((_window_key(p.send_window), p.timezone) for p in people)
        if shape not in known:
            known[shape] = common_opening(((p.send_window, p.timezone) for p in people), now)
        return known[shape]

    return opening_of


def _window_key(window: Mapping[str, Any] | None) -> tuple | None:
    if not window:
        return None
    return (tuple(window.get("days", ())), window.get("from"), window.get("until"))


def _pending(row: Notification, channel: str) -> bool:
    return channel in row.channels and channel not in row.channel_state


class Person(NamedTuple):
    """What the tick reads of a recipient."""

    key: str
    email: str
    timezone: str
    send_window: Mapping[str, Any] | None
    preferences: Mapping[str, Any]


def _apply(
    row: Notification,
    people: list[Person],
    *,
    opening_of: Callable[[list[Person]], datetime | None],
) -> datetime | None:
    critical = is_critical(row.category)
    skipped: dict[str, str] = {}
    if (
        _pending(row, Channel.WEBHOOK)
        and people
        and not critical
        and not any(_takes(p, Channel.WEBHOOK, row.category) for p in people)
    ):
        skipped[Channel.WEBHOOK] = PREFERENCE
    opening = None
    if _pending(row, Channel.EMAIL):
        taking = [p for p in people if critical or _takes(p, Channel.EMAIL, row.category)]
        if not taking:
            skipped[Channel.EMAIL] = PREFERENCE if people else NO_RECIPIENT
        else:
            row.email_to = list(dict.fromkeys(p.email for p in taking))
            if len(taking) == 1 and not critical:
                row.email_headers = unsubscribe.headers(
                    tenant_id=row.tenant_id, key=taking[0].key, category=row.category
                )
            opening = opening_of(taking)
    if skipped:
        row.skipped_channels = skipped
        row.channel_state = {**row.channel_state, **dict.fromkeys(skipped, SKIPPED)}
    return opening


def _takes(person: Person, channel: str, category: str) -> bool:
    return allows(person.preferences, channel=channel, category=category)
