"""How products observe the engine without the engine knowing them (DESIGN §17).

A product registers its hooks in its `AppConfig.ready()`, as handlers register with
`jobs.registry`:
- `on_claimed(rows, now)` answers, for the claimed rows it has a say in, a SendDecision each:
  values, never writes onto the rows. The engine applies them to the attempt at hand
  (`decided`). People: a digest's listing, recipients' addresses, opt-outs (suppressed
  channels), unsubscribe headers and footers, and send windows. Webhooks: the payload of
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

from delivery.models import DeliveryOutcome, Notification, WebhookEndpoint

# What a channel a decision suppresses holds in `channel_state`: settled, neither delivered
# nor failed, so it is never sent for this occurrence.
SUPPRESSED = DeliveryOutcome.SUPPRESSED.value

_NOTHING: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SendDecision:
    """What a product decided for one claimed row's attempt; a field left at its default
    leaves the row as it is."""

    # The email's body for this attempt (a digest's listing).
    body: str | None = None
    # The addresses the email goes to (the recipients who take it).
    email_to: Sequence[str] | None = None
    # Extra headers of the email, where link references stand for tokens the engine renders.
    email_headers: tuple[tuple[str, str], ...] = ()
    # What the email's body ends with (an unsubscribe link), references rendered likewise.
    email_footer: str = ""
    # Channels not sent this occurrence (logged `suppressed`), each with the reason the
    # delivery log shows.
    suppressed_channels: Mapping[str, str] = field(default_factory=lambda: _NOTHING)
    # When the email may go, if it must wait (a closed send window).
    email_wait: datetime | None = None
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
        if decision.body is not None:
            row.body = decision.body
        if decision.email_to is not None:
            row.email_to = list(decision.email_to)
        if decision.email_headers:
            row.email_headers = decision.email_headers
        if decision.email_footer:
            row.email_footer = decision.email_footer
        if decision.suppressed_channels:
            row.suppressed_channels = decision.suppressed_channels
            row.channel_state = {
                **row.channel_state,
                **dict.fromkeys(decision.suppressed_channels, SUPPRESSED),
            }
        # Left as it is when unsaid: another product's decision for the row may have set it.
        if decision.email_wait is not None:
            row.email_wait = decision.email_wait
        if decision.webhook_data is not None:
            row.webhook_data = decision.webhook_data


def written_back(outcomes: WriteBackOutcomes, *, now: datetime) -> None:
    """Tell every product what a write-back settled; called inside its transaction."""
    if not outcomes:
        return
    for hook in _after_write_back:
        hook(outcomes, now)
