"""The one door producers put sends through (DESIGN §17).

Every queued send is a Notification row the tick claims; the products make them here:
- `one_shot_due` builds an unsaved one-shot row and `put` inserts rows, in the caller's
  transaction (a message's deliveries, a digest's e-mail, an account e-mail);
- `email` checks one address and puts one e-mail due now (the product's account e-mails);
- `announce` is a producer's announcement to a tenant (a project's activation, an endpoint's
  retirement): its e-mails, checked as the API checks them, and its event, in one insert;
- `events_publish` and `event_rows` hand events to the registered publisher (the webhooks
  product turns each into a message and its deliveries), so a producer publishes without
  knowing who delivers events;
- `digest_join` hands a recipient's event to the registered digest joiner (the people
  product gathers them into one e-mail, put here);
- `rearmed` is what puts a failing row back on the schedule (a retry, a recovery).
"""

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from dbtools.fields import max_length
from delivery.models import Channel, Notification, NotificationSource
from delivery.states import Move, NotificationState, after
from delivery.validation import recipient_errors
from web.errors import InvalidInput
from web.fields import single_line

SUBJECT_MAX = max_length(Notification, "subject")


def one_shot_due(due: datetime, *, now: datetime | None = None, **fields: Any) -> Notification:
    """An unsaved one-shot notification due at `due` (made at `now`, by default `due`), as
    the product's producers make them: `fields` say what it sends."""
    made = now or due
    return Notification(
        next_fire_at=due,
        due_at=due,
        recurrence_anchor=due,
        occurrence=1,
        state=after(None, Move.CREATE),
        timezone="UTC",
        created_at=made,
        updated_at=made,
        **fields,
    )


def put(rows: Sequence[Notification], *, skip_existing: bool = False) -> None:
    """Insert `rows` in one statement; with `skip_existing`, a row whose source key (or
    id) exists already is left out instead of failing the insert."""
    if rows:
        Notification.objects.bulk_create(rows, ignore_conflicts=skip_existing)


def email(*, tenant_id: UUID, address: str, subject: str, body: str, now: datetime) -> Notification:
    """Queue one of the product's own e-mails to `address`, due now; InvalidInput for an
    address the API would refuse."""
    errors = recipient_errors([Channel.EMAIL], [address])
    if errors:
        raise InvalidInput(errors)
    row = _system_email(now, tenant_id=tenant_id, address=address, subject=subject, body=body)
    row.save(force_insert=True)
    return row


def _system_email(
    now: datetime, *, tenant_id: UUID, address: str, subject: str, body: str, **fields: Any
) -> Notification:
    """An unsaved e-mail of the product's own to `address`, due now, its subject on one line."""
    return one_shot_due(
        now,
        tenant_id=tenant_id,
        source=NotificationSource.SYSTEM,
        channels=[Channel.EMAIL],
        email_to=[address],
        subject=single_line(subject)[:SUBJECT_MAX],
        body=body,
        **fields,
    )


def rearmed(*, next_fire_at: datetime, state: NotificationState) -> dict[str, Any]:
    """The values that put a failing row back on the schedule with its error state cleared
    (a retry, an unpark, an endpoint's recovery)."""
    # A re-armed row starts its occurrence afresh: its lateness counts from now on, not
    # from when it first failed.
    return {
        "state": state,
        "error_count": 0,
        "last_error": None,
        "dead_letter_reason": "",
        "unfinished_claims": 0,
        "next_fire_at": next_fire_at,
        "due_at": next_fire_at,
        # A retried email goes in a new batch under a new key: the old batch's key would
        # make Resend replay its old answer instead of sending.
        "email_batch": None,
    }


# --- Digests -------------------------------------------------------------------------------

# The longest a digest's window may stay open.
MAX_WINDOW_SECONDS = 7 * 86_400
# The longest subject a digest key may be given (its email's subject adds the count).
MAX_DIGEST_SUBJECT = 100


# Who gathers a recipient's events into one e-mail (the people product): called with the
# event (tenant, recipient_key, key, window_seconds, subject, body, category, now) and the
# digest's own subject (digest_subject, "" for the default), it answers the notification
# that delivers the digest.
DigestJoiner = Callable[..., Notification]
_digest_joiner: list[DigestJoiner] = []  # at most one


def register_digest_joiner(joiner: DigestJoiner) -> None:
    """Say who gathers digests; a later registration replaces an earlier one."""
    _digest_joiner[:] = [joiner]


def digest_join(**event: Any) -> Notification:
    """Add one event to the recipient's open digest (the registered joiner's arguments);
    returns the notification that delivers the digest. InvalidInput when no product
    gathers digests."""
    if not _digest_joiner:
        raise InvalidInput({"digest": ["Digests are not available."]})
    return _digest_joiner[0](**event)


# --- Events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One event to publish: `event_type` with `payload` to whoever the tenant has
    subscribed to it among the endpoints of `application_id` (the publisher's grouping of
    the tenant's endpoints; None: the tenant's own endpoints); `event_id` deduplicates it
    within that group."""

    tenant_id: UUID
    event_type: str
    payload: dict[str, Any]
    event_id: str | None = None
    project_id: UUID | None = None
    source: NotificationSource = NotificationSource.API
    application_id: UUID | None = None


class EventPublisher(Protocol):
    """Who turns events into sends (the webhooks product, registered at start-up)."""

    def publish(
        self, events: Sequence[Event], *, now: datetime, alongside: Sequence[Notification]
    ) -> list[Any]:
        """Publish `events` and insert `alongside` with their sends; one result each."""
        ...

    def rows(self, event: Event, *, now: datetime) -> list[Any]:
        """`event` and its sends as unsaved rows, for a producer's own insert."""
        ...


_publisher: list[EventPublisher] = []  # at most one


def register_event_publisher(publisher: EventPublisher) -> None:
    """Say who turns events into sends; a later registration replaces an earlier one."""
    _publisher[:] = [publisher]


def events_publish(
    events: Sequence[Event], *, now: datetime, alongside: Sequence[Notification] = ()
) -> list[Any]:
    """Publish `events` through the registered publisher, with `alongside` (a producer's
    e-mails; any whose source key exists already skipped) in the same insert. Without a
    publisher, only `alongside` is put."""
    if not _publisher:
        put(alongside, skip_existing=True)
        return []
    return _publisher[0].publish(events, now=now, alongside=alongside)


def event_rows(event: Event, *, now: datetime) -> list[Any]:
    """`event` and its sends as unsaved rows (none without a publisher), for a producer
    that inserts them with its own rows in one statement."""
    return _publisher[0].rows(event, now=now) if _publisher else []


# --- Announcements -------------------------------------------------------------------------


@dataclass(frozen=True)
class Announcement:
    """What a producer (e.g. a project's provisioning) tells a tenant: an email to
    `addresses` and an `event` ({"type": one of the product's event types, "data"})
    published to whoever subscribed to it."""

    addresses: Sequence[str]
    email_subject: str
    email_body: str
    event: dict[str, Any]


@dataclass(frozen=True)
class Announced:
    """One producer's announcement to one tenant, keyed by `source_key` (about a project,
    or about none: a webhook endpoint's retirement)."""

    tenant_id: UUID
    project_id: UUID | None
    source_key: str
    announcement: Announcement


def announce(items: Sequence[Announced], *, now: datetime) -> None:
    """Create each announcement's e-mails, due now, and publish its event, in one insert
    of the e-mails and the event's sends whatever their number.

    Each e-mail's source key extends its item's `source_key` (`…:invite:<address
    digest>`) and each event's id is `<source_key>:<type>`, so a producer that runs twice
    creates nothing the second time. Addresses are checked as the API checks them: an
    invalid one raises InvalidInput and creates nothing."""
    for item in items:
        addresses = list(item.announcement.addresses)
        errors = recipient_errors([Channel.EMAIL], addresses)
        if addresses and errors:
            raise InvalidInput(errors)
    emails = [row for item in items for row in _emails(item, now=now)]
    events = [
        Event(
            tenant_id=item.tenant_id,
            event_type=item.announcement.event["type"],
            payload=item.announcement.event.get("data") or {},
            event_id=f"{item.source_key}:{item.announcement.event['type']}",
            project_id=item.project_id,
            source=NotificationSource.SYSTEM,
        )
        for item in items
    ]
    events_publish(events, now=now, alongside=emails)


def _emails(item: Announced, *, now: datetime) -> Iterable[Notification]:
    announcement, source_key = item.announcement, item.source_key
    return [
        _system_email(
            now,
            tenant_id=item.tenant_id,
            address=address,
            subject=announcement.email_subject,
            body=announcement.email_body,
            project_id=item.project_id,
            source_key=f"{source_key}:invite:{_digest(address)}",
        )
        for address in announcement.addresses
    ]


def _digest(address: str) -> str:
    # Keeps the key short and keeps the address itself out of an identifier.
    return hashlib.sha256(address.lower().encode()).hexdigest()[:32]
