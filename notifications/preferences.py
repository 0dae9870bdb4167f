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

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import Q

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


def prepare(rows: Iterable[Notification], *, now: datetime) -> None:
    """Apply the recipients of each row that names some (see the module's docstring)."""
    rows = [row for row in rows if row.recipients]
    if not rows:
        return
    keys: dict[Any, set[str]] = {}
    for row in rows:
        keys.setdefault(row.tenant_id, set()).update(row.recipients)
    wanted = Q()
    for tenant_id, tenant_keys in keys.items():
        wanted |= Q(tenant_id=tenant_id, key__in=sorted(tenant_keys))
    # Plain tuples, not models: this runs for every claim of rows that name recipients.
    found = {
        (tenant_id, key): Person(key, email, zone, window, prefs or {})
        for tenant_id, key, email, zone, window, prefs in Recipient.objects.filter(
            wanted
        ).values_list("tenant_id", "key", "email", "timezone", "send_window", "preferences")
    }
    for row in rows:
        people = [found[key] for k in row.recipients if (key := (row.tenant_id, k)) in found]
        row.email_wait = _apply(row, people, now=now)


def _pending(row: Notification, channel: str) -> bool:
    return channel in row.channels and channel not in row.channel_state


class Person(NamedTuple):
    """What the tick reads of a recipient."""

    key: str
    email: str
    timezone: str
    send_window: Mapping[str, Any] | None
    preferences: Mapping[str, Any]


def _apply(row: Notification, people: list[Person], *, now: datetime) -> datetime | None:
    critical = is_critical(row.category)
    skipped: dict[str, str] = {}
    webhook_wanted = any(_takes(p, Channel.WEBHOOK, row.category) for p in people)
    if _pending(row, Channel.WEBHOOK) and people and not critical and not webhook_wanted:
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
            opening = common_opening(((p.send_window, p.timezone) for p in taking), now)
    if skipped:
        row.skipped_channels = skipped
        row.channel_state = {**row.channel_state, **dict.fromkeys(skipped, SKIPPED)}
    return opening


def _takes(person: Person, channel: str, category: str) -> bool:
    return allows(person.preferences, channel=channel, category=category)
