"""How products observe the engine without the engine knowing them (DESIGN §17).

A product registers its hooks in its `AppConfig.ready()`, as handlers register with
`jobs.registry`:
- `on_claimed(rows, now)` answers, for the claimed rows it has a say in, a SendDecision each:
  values, never writes onto the rows. The engine applies them to the attempt at hand
  (`decided`). People: a digest's subject and listing, recipients' addresses, opt-outs (suppressed
  channels or copies), and each recipient's copy of the email: address, unsubscribe
  headers and footer, send window. Webhooks: the payload of
  each message a claimed row delivers, stored once with the message rather than in every
  delivery row.
- `after_write_back(outcomes, now)` runs inside the write-back's transaction, after the rows
  and the delivery log are written. Webhooks: messages out of attempts, retired endpoints.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from delivery.copies import EmailCopy
from delivery.models import DeliveryOutcome, Notification, WebhookEndpoint

# What a channel a decision suppresses holds in `channel_state`: settled, neither delivered
# nor failed, so it is never sent for this occurrence.
SUPPRESSED = DeliveryOutcome.SUPPRESSED.value

_NOTHING: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SendDecision:
    """What a product decided for one claimed row's attempt; a field left at its default
    leaves the row as it is."""

    # The email's subject and body for this attempt (a digest's).
    subject: str | None = None
    body: str | None = None
    # The email's copies, one per recipient who takes it (delivery.copies), each with its
    # address, headers, footer and send window.
    email_copies: Sequence[EmailCopy] | None = None
    # Channels, or copies (`email:<key>`), not sent this occurrence (logged `suppressed`),
    # each with the reason the delivery log shows.
    suppressed_channels: Mapping[str, str] = field(default_factory=lambda: _NOTHING)
    # The webhook event's `data` (the payload of the message the row delivers), for a row
    # whose stored event leaves it out.
    webhook_data: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class WriteBackOutcomes:
    """What one write-back settled: the rows it dead-lettered, and the endpoints whose
    failures have lasted long enough to retire them."""

    dead_lettered: Sequence[Any] = ()
    retiring: Sequence[WebhookEndpoint] = ()

    def __bool__(self) -> bool:
        return bool(self.dead_lettered or self.retiring)


ClaimedHook = Callable[[Sequence[Notification], datetime], Mapping[Any, SendDecision]]
WriteBackHook = Callable[[WriteBackOutcomes, datetime], None]

_on_claimed: list[ClaimedHook] = []
_after_write_back: list[WriteBackHook] = []


def register_on_claimed(hook: ClaimedHook) -> None:
    if hook not in _on_claimed:
        _on_claimed.append(hook)


def register_after_write_back(hook: WriteBackHook) -> None:
    if hook not in _after_write_back:
        _after_write_back.append(hook)


def claimed(rows: Sequence[Notification], *, now: datetime) -> None:
    """Ask every product about the claimed `rows` and apply what they decide to this
    attempt (in memory: nothing is stored but what the write-back stores)."""
    if not rows:
        return
    for hook in _on_claimed:
        decided(rows, hook(rows, now))


def decided(rows: Sequence[Notification], decisions: Mapping[Any, SendDecision]) -> None:
    """Apply `decisions` (by row id) to the rows' attempt at hand."""
    if not decisions:
        return
    for row in rows:
        decision = decisions.get(row.pk)
        if decision is None:
            continue
        if decision.subject is not None:
            row.subject = decision.subject
        if decision.body is not None:
            row.body = decision.body
        if decision.email_copies is not None:
            row.email_copies = decision.email_copies
        # What an earlier attempt of the occurrence settled stays as it was.
        suppressed = {
            unit: reason
            for unit, reason in decision.suppressed_channels.items()
            if unit not in row.channel_state
        }
        if suppressed:
            row.suppressed_channels = suppressed
            row.channel_state = {**row.channel_state, **dict.fromkeys(suppressed, SUPPRESSED)}
        if decision.webhook_data is not None:
            row.webhook_data = decision.webhook_data


def written_back(outcomes: WriteBackOutcomes, *, now: datetime) -> None:
    """Tell every product what a write-back settled; called inside its transaction."""
    if not outcomes:
        return
    for hook in _after_write_back:
        hook(outcomes, now)
