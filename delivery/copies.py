"""An email goes to each of its recipients as a copy of its own: one address in `to`, that
recipient's headers and footer (their unsubscribe link), sent in that recipient's send
window. No recipient sees another's address.

Each copy is settled on its own, in the row's `channel_state` under its unit,
`email:<key>` (the recipient's key, or the address for a plain `email_to` address): a copy
delivered is never sent again for the occurrence, while the others wait for their window
or are retried. The email channel is pending while some copy is. A row whose email has no
copy (no address at all) is settled as one unit, `email`, as an unknown channel is.

Imports nothing of Django at run time.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delivery.models import Notification

EMAIL = "email"
_PREFIX = EMAIL + ":"


@dataclass(frozen=True, slots=True)
class EmailCopy:
    """One recipient's copy of a row's email. `headers` and `footer` hold link references
    where tokens go (delivery.header_tokens); `wait` is when the copy may go, if its
    recipient's send window is closed now."""

    key: str
    to: str
    headers: tuple[tuple[str, str], ...] = ()
    footer: str = ""
    wait: datetime | None = None

    @property
    def unit(self) -> str:
        return _PREFIX + self.key


def channel_of(unit: str) -> str:
    """The channel a unit of a row's delivery belongs to (`email:ada` → `email`)."""
    return unit.partition(":")[0]


def recipient_of(unit: str) -> str:
    """The recipient a unit names ("" for a whole channel)."""
    return unit.partition(":")[2]


def copies_of(row: "Notification") -> Sequence[EmailCopy]:
    """The row's copies for this attempt: as a product decided them (its recipients), else
    one per distinct `email_to` address."""
    if row.email_copies is not None:
        return row.email_copies
    return [EmailCopy(key=address, to=address) for address in dict.fromkeys(row.email_to or ())]


def units(row: "Notification") -> list[str]:
    """What the row's occurrence is settled by, in its channels' order: each channel, its
    email as one unit per copy."""
    found: list[str] = []
    for channel in row.channels:
        if channel == EMAIL and EMAIL not in row.channel_state:
            copies = copies_of(row)
            if copies:
                found += [copy.unit for copy in copies]
                continue
        found.append(channel)
    return found


def unsettled_copies(row: "Notification") -> list[EmailCopy]:
    """The copies not settled yet this occurrence."""
    if EMAIL not in row.channels or EMAIL in row.channel_state:
        return []
    state = row.channel_state
    return [copy for copy in copies_of(row) if copy.unit not in state]


def email_pending(row: "Notification") -> bool:
    """Whether the row's email still has something to send this occurrence: an unsettled
    copy, or no copy at all and nothing of it settled (it fails: no recipient)."""
    if EMAIL not in row.channels or EMAIL in row.channel_state:
        return False
    if unsettled_copies(row):
        return True
    return not copies_of(row) and not any(unit.startswith(_PREFIX) for unit in row.channel_state)


def outgoing_copies(row: "Notification", deferred: Mapping[str, Any]) -> list[EmailCopy]:
    """The unsettled copies that go now: their recipient's window is open, and neither the
    email nor the copy is `deferred`."""
    if EMAIL in deferred:
        return []
    return [
        copy for copy in unsettled_copies(row) if copy.wait is None and copy.unit not in deferred
    ]


def email_ready(row: "Notification", deferred: Mapping[str, Any]) -> bool:
    """Whether the row's email has something to send now, beside what is `deferred`."""
    if not email_pending(row) or EMAIL in deferred:
        return False
    return bool(outgoing_copies(row, deferred)) or not copies_of(row)


def waiting_copies(row: "Notification") -> Iterator[EmailCopy]:
    """The unsettled copies whose recipient's send window is closed now."""
    return (copy for copy in unsettled_copies(row) if copy.wait is not None)
