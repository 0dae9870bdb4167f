"""What recipients' preferences and send windows mean for a claimed row, at send time.

The tick asks (`decisions`, through people's `on_claimed` hook) about the rows it claimed
(one query for all their recipients) before their channels go out. For a row that names
recipients the decision says:
- `email_copies`: one copy of the email for each recipient who takes it (delivery.copies),
  to their current address alone, with their own one-click unsubscribe headers and footer
  link unless the category is critical, and, when their send window is closed now, when it
  next opens: each copy goes in its recipient's own window.
- `suppressed_channels`: the copy of each recipient who opted out of this email
  (`email:<key>`), and a channel every recipient opted out of, with the reason the delivery
  log shows (outcome `suppressed`), `preference` (`no_recipient` when none of the named
  recipients exists any more); they are never sent.

Categories named in CRITICAL_CATEGORIES ignore opt-outs.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connections, router

from dbtools.fields import concrete_field
from delivery.copies import EmailCopy
from delivery.hooks import SendDecision
from delivery.models import Channel, Notification
from people import unsubscribe
from people.models import Recipient
from people.quiet_hours import next_opening

PREFERENCE = "preference"
NO_RECIPIENT = "no_recipient"


def allows(preferences: Mapping[str, Any], *, channel: str, category: str) -> bool:
    """Whether `preferences` let `channel` through for `category` (unset means yes)."""
    if preferences.get("channels", {}).get(channel) is False:
        return False
    return (
        not category
        or preferences.get("categories", {}).get(category, {}).get(channel) is not False
    )


# The claimed rows' recipients by (tenant, key) pairs, one round trip. Plain SQL rather than
# a queryset: this runs for every claim of rows naming recipients, and compiling an OR of
# per-tenant IN lists cost the tick four times what reading the rows did. The pairs go as
# one JSON text, on PostgreSQL too: dumping two typed arrays cost the driver more per pair;
# each pair is looked up through an index (LATERAL, kept a subquery by its LIMIT: the key
# is unique), never by a hash join over the whole table. The tenant comes back as the text
# it was asked with, which maps back to the rows' own tenant ids without parsing a UUID.
_PEOPLE = {
    "postgresql": """
        SELECT r.tenant_id::text, r."key", r.id, r.email, r.timezone, r.send_window,
            r.preferences
        FROM jsonb_array_elements(%s::jsonb) AS wanted
        CROSS JOIN LATERAL (
            SELECT * FROM notifications_recipient
            WHERE tenant_id = (wanted ->> 0)::uuid AND "key" = wanted ->> 1
            LIMIT 1
        ) AS r
    """,
    "sqlite": """
        SELECT r.tenant_id, r."key", r.id, r.email, r.timezone, r.send_window, r.preferences
        FROM json_each(%s) AS wanted
        JOIN notifications_recipient r
            ON r.tenant_id = json_extract(wanted.value, '$[0]')
            AND r."key" = json_extract(wanted.value, '$[1]')
    """,
}


def decisions(rows: Iterable[Notification], *, now: datetime) -> dict[Any, SendDecision]:
    """The decision of each row that names recipients (see the module's docstring), by id."""
    rows = [row for row in rows if row.recipients]
    if not rows:
        return {}
    wanted: dict[Any, set[str]] = {}
    for row in rows:
        wanted.setdefault(row.tenant_id, set()).update(row.recipients)
    found = _people(wanted)
    rules = _Rules(
        critical=frozenset(settings.CRITICAL_CATEGORIES),
        unsubscribe_url=settings.UNSUBSCRIBE_URL,
        opening_of=_openings(now),
    )
    nobody: dict[str, Person] = {}
    decided = {}
    for row in rows:
        of_tenant = found.get(row.tenant_id, nobody)
        people = [person for key in row.recipients if (person := of_tenant.get(key))]
        decided[row.pk] = _decision(row, people, rules=rules)
    return decided


def _people(wanted: Mapping[Any, set[str]]) -> dict[Any, dict[str, "Person"]]:
    """The recipients that exist among `wanted` keys by tenant id: {tenant id: {key:
    person}}."""
    connection = connections[router.db_for_read(Recipient)]
    tenant = concrete_field(Recipient, "tenant")
    tenant_of = {str(tenant.get_db_prep_value(t, connection)): t for t in wanted}
    pairs = [[text, key] for text, t in tenant_of.items() for key in sorted(wanted[t])]
    with connection.cursor() as cursor:
        cursor.execute(_PEOPLE[connection.vendor], [json.dumps(pairs)])
        found = cursor.fetchall()
    decoded = _Decoded()
    people: dict[Any, dict[str, Person]] = {}
    for tenant_text, key, recipient_id, email, zone, window, prefs in found:
        people.setdefault(tenant_of[tenant_text], {})[key] = Person(
            key,
            recipient_id,
            email,
            zone,
            decoded(window),
            decoded(prefs) or {},
            (_text(window), zone),
        )
    return people


def _text(value: Any) -> Any:
    """A JSON column's value as a hashable key: its text as read (PostgreSQL writes equal
    jsonb values as equal text)."""
    return value if value is None or isinstance(value, (str, bytes)) else json.dumps(value)


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


def _openings(now: datetime) -> Callable[["Person"], datetime | None]:
    """`next_opening` of a person's window at `now`, worked out once per distinct
    (window, zone): a claim's recipients mostly share a few."""
    known: dict[tuple, datetime | None] = {}

    def opening_of(person: Person) -> datetime | None:
        if person.shape not in known:
            known[person.shape] = next_opening(person.send_window, person.timezone, now)
        return known[person.shape]

    return opening_of


def _pending(row: Notification, channel: str) -> bool:
    return channel in row.channels and channel not in row.channel_state


class Person(NamedTuple):
    """What the tick reads of a recipient."""

    key: str
    # The recipient's row: an unsubscribe token names it, not the key.
    id: int
    email: str
    timezone: str
    send_window: Mapping[str, Any] | None
    preferences: Mapping[str, Any]
    # (the send window as stored, the zone): people of one shape share their openings.
    shape: tuple[Any, str]


class _Rules(NamedTuple):
    """What one claim's rows are weighed by, read once per claim."""

    critical: frozenset[str]
    unsubscribe_url: str
    opening_of: Callable[[Person], datetime | None]


def _decision(row: Notification, people: list[Person], *, rules: _Rules) -> SendDecision:
    category = row.category
    critical = bool(category) and category in rules.critical
    suppressed: dict[str, str] = {}
    if (
        _pending(row, Channel.WEBHOOK)
        and people
        and not critical
        and not any(_takes(p, Channel.WEBHOOK, category) for p in people)
    ):
        suppressed[Channel.WEBHOOK] = PREFERENCE
    copies: list[EmailCopy] | None = None
    if _pending(row, Channel.EMAIL):
        if not people:
            suppressed[Channel.EMAIL] = NO_RECIPIENT
        else:
            copies = []
            addresses: set[str] = set()
            for person in people:
                if not (critical or _takes(person, Channel.EMAIL, category)):
                    suppressed[f"{Channel.EMAIL}:{person.key}"] = PREFERENCE
                elif person.email not in addresses:
                    # Two keys of one address: that address gets one copy.
                    addresses.add(person.email)
                    copies.append(_copy(row, person, critical=critical, rules=rules))
    return SendDecision(email_copies=copies, suppressed_channels=suppressed)


def _copy(row: Notification, person: Person, *, critical: bool, rules: _Rules) -> EmailCopy:
    """The person's own copy of the row's email."""
    headers: tuple[tuple[str, str], ...] = ()
    footer = ""
    if not critical:
        url = unsubscribe.link(
            tenant_id=row.tenant_id,
            recipient_id=person.id,
            category=row.category,
            url=rules.unsubscribe_url,
        )
        headers, footer = unsubscribe.headers(url), unsubscribe.footer(url)
    return EmailCopy(
        key=person.key,
        to=person.email,
        headers=headers,
        footer=footer,
        wait=rules.opening_of(person),
    )


def _takes(person: Person, channel: str, category: str) -> bool:
    return allows(person.preferences, channel=channel, category=category)
