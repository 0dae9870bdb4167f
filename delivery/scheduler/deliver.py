"""Deliver one claimed row: its channels in parallel, each bounded by the channel timeout,
in the row workers (`RowWorkers`); what a delivery brings back (`RowDelivery`: the results,
and the channels deferred unattempted with their `Deferral` and its reason).

Runs in a worker thread with no database access: everything it needs (the row, its webhook
endpoint) was loaded by the row lane. Never raises: a channel that raises or overruns
becomes a failed DeliveryResult.
"""

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models

from delivery.copies import email_pending, email_ready, units
from delivery.models import Channel, Notification, WebhookEndpoint
from delivery.scheduler.sending_process import WAVES_BEFORE_A_PROCESS, SendingProcess
from delivery.transports import webhook
from delivery.transports.base import DeliveryResult
from delivery.transports.registry import TRANSPORTS
from outbound.categories import ErrorCategory
from outbound.connections import Connections

logger = logging.getLogger("delivery.scheduler")

Sender = Callable[..., DeliveryResult]  # sender(message, *, timeout=seconds)


class Senders:
    """The send function of each channel, by channel (`Senders(email=…, webhook=…)`); tests
    inject fakes, production uses the transports' own (`default_senders`). With
    `email_batch` (Resend configured), emails go out in batches instead of one by one:
    email_batch(body=, size=, key=, timeout=) -> BatchAnswer."""

    __slots__ = ("by_channel", "email_batch")

    def __init__(
        self, *, email_batch: Callable[..., Any] | None = None, **by_channel: Sender
    ) -> None:
        self.by_channel: Mapping[str, Sender] = by_channel
        self.email_batch = email_batch

    def of(self, channel: str) -> Sender | None:
        return self.by_channel.get(channel)


def default_senders(connections: Connections | None = None) -> Senders:
    """Every registered transport's sender, on connections kept alive in `connections`
    (the tick's)."""
    from delivery.transports.resend import send_batch

    batches = functools.partial(send_batch, connections=connections)
    return Senders(
        email_batch=batches if settings.RESEND_API_KEY else None,
        **{channel: transport.sender(connections) for channel, transport in TRANSPORTS.items()},
    )


class DeferralReason(models.TextChoices):
    """Why a channel of an occurrence was deferred unattempted (a deferred delivery-log
    row's category)."""

    CIRCUIT_OPEN = "circuit_open", "Endpoint circuit open"
    SEND_BUDGET = "send_budget", "No email send budget"
    ENDPOINT_RATE_LIMIT = "endpoint_rate_limit", "Over the endpoint's rate limit"
    RATE_LIMITED = ErrorCategory.RATE_LIMITED.value, "Provider asked to wait (Retry-After)"
    PLAN_RATE = "plan_rate", "The plan's deliveries per second"
    # A recipient's send window is closed: the email waits for it to open.
    QUIET_HOURS = "quiet_hours", "Recipient's send window closed"


@dataclass(frozen=True)
class Deferral:
    """A channel not attempted now: when it may go, and why."""

    until: datetime
    reason: DeferralReason


@dataclass(frozen=True)
class RowDelivery:
    """What one row's delivery produced: one result per channel attempted, in the row's
    order, and the channels deferred unattempted."""

    notification: Notification
    results: dict[str, DeliveryResult]
    attempted_at: datetime
    deferred: Mapping[str, Deferral] = field(default_factory=dict)


def pending_channels(notification: Notification) -> list[str]:
    """The occurrence's channels not settled yet (a deferred channel goes later alone; an
    email, while some copy of it is unsettled)."""
    return [
        c
        for c in notification.channels
        if (
            email_pending(notification)
            if c == Channel.EMAIL
            else c not in notification.channel_state
        )
    ]


def channels_to_send(notification: Notification, deferred: Mapping[str, Deferral]) -> list[str]:
    """The pending channels with something to send now, beside the `deferred` ones (by
    channel, or an email's copies by unit)."""
    return [
        c
        for c in pending_channels(notification)
        if c not in deferred and (c != Channel.EMAIL or email_ready(notification, deferred))
    ]


def _failure(
    error: str, category: ErrorCategory, *, permanent: bool, started: float
) -> DeliveryResult:
    return DeliveryResult(
        ok=False,
        error=error,
        permanent=permanent,
        category=category,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def _call(sender: Sender, message: Any, timeout: float) -> DeliveryResult:
    started = time.monotonic()
    try:
        return sender(message, timeout=timeout)
    except Exception as exc:  # a channel must not raise; if it does, the row still finishes
        return _failure(
            f"channel raised {type(exc).__name__}",
            ErrorCategory.INTERNAL,
            permanent=False,
            started=started,
        )


def _channel_calls(
    channel: str,
    notification: Notification,
    *,
    endpoint: WebhookEndpoint | None,
    now: datetime,
    senders: Senders,
    deferred: Mapping[str, Deferral],
) -> dict[str, tuple[Sender, Any] | DeliveryResult]:
    """The sender and message of each unit of `channel` that goes now (its transport,
    delivery.transports.registry: the channel, or an email's copies), or a ready result
    when no call can help."""
    transport = TRANSPORTS.get(channel)
    sender = senders.of(channel)
    if transport is None or sender is None:
        return {
            channel: _failure(
                "unknown channel",
                ErrorCategory.INVALID_REQUEST,
                permanent=True,
                started=time.monotonic(),
            )
        }
    messages = transport.messages(notification, endpoint=endpoint, now=now, deferred=deferred)
    return {
        unit: message if isinstance(message, DeliveryResult) else (sender, message)
        for unit, message in messages.items()
    }


def deliver_row(
    notification: Notification,
    *,
    endpoint: WebhookEndpoint | None,
    now: datetime,
    senders: Senders,
    pool: Executor,
    timeout: float,
    deferred: Mapping[str, Deferral] | None = None,
    elsewhere: frozenset[str] = frozenset(),
) -> RowDelivery:
    """Run the row's pending channels but the `deferred` ones and those sent `elsewhere`
    (an email in a batch) in parallel on `pool`, an email as one call per copy; a call
    still running at the deadline (its own timeout plus a small grace) is recorded as a
    timeout. A webhook alone runs in this thread: its transport bounds the whole exchange
    itself."""
    started = time.monotonic()
    deferred = deferred or {}
    results: dict[str, DeliveryResult] = {}
    calls: dict[str, tuple[Sender, Any]] = {}
    for channel in channels_to_send(notification, deferred):
        if channel in elsewhere:
            continue
        found = _channel_calls(
            channel, notification, endpoint=endpoint, now=now, senders=senders, deferred=deferred
        )
        for unit, call in found.items():
            if isinstance(call, DeliveryResult):
                results[unit] = call
            else:
                calls[unit] = call
    if list(calls) == [Channel.WEBHOOK]:
        # The webhook transport bounds its own exchange (outbound.deadline): alone, it runs
        # here, without a hand-off to the channel pool and back.
        results[Channel.WEBHOOK] = _call(*calls[Channel.WEBHOOK], timeout)
    else:
        pending = {channel: pool.submit(_call, *call, timeout) for channel, call in calls.items()}
        results.update(_await_channels(pending, timeout=timeout, started=started))
    ordered = {u: results[u] for u in units(notification) if u in results}
    return RowDelivery(
        notification=notification, results=ordered, attempted_at=now, deferred=deferred
    )


def _await_channels(
    pending: Mapping[str, "Future[DeliveryResult]"], *, timeout: float, started: float
) -> dict[str, DeliveryResult]:
    """The running calls' results, by unit; one still running at the deadline is a
    timeout."""
    # The transport bounds itself; this grace only catches a channel that does not.
    wait(pending.values(), timeout=timeout + min(1.0, timeout / 4))
    results = {}
    for channel, future in pending.items():
        if future.done():
            results[channel] = future.result()
        else:
            future.cancel()
            results[channel] = _failure(
                f"no answer within {timeout:g}s",
                ErrorCategory.TIMEOUT,
                permanent=False,
                started=started,
            )
    return results


class RowWorkers:
    """The row lane's workers: at most `concurrency` rows in flight. A row's webhook alone
    runs on its row worker; otherwise its channels run on a pool of their own, an email a
    call per copy (a call that overran its deadline may still hold a thread, so the channel
    pool is not shared with the row workers). Copies queued for a thread past the deadline
    are not sent: they are timeouts, retried like any failed copy. With Resend configured,
    emails go in batches instead (batchlane.py) and only webhooks come here."""

    def __init__(
        self,
        *,
        concurrency: int,
        senders: Senders,
        timeout: float,
        executor: Callable[..., Any],
        sending: Callable[[], SendingProcess | None] | None = None,
    ) -> None:
        """`sending` starts the tick's sending process (sending_process.py), once this
        tick has sent WAVES_BEFORE_A_PROCESS waves of webhooks itself; None: every row is
        delivered here."""
        self.concurrency, self.senders, self.timeout = concurrency, senders, timeout
        # future -> (row, the endpoint whose slot it holds or None)
        self.in_flight: dict[Future, tuple[Notification, Any]] = {}
        self.rows = executor(concurrency, thread_name_prefix="tick-row")
        self.channels = executor(2 * concurrency, "tick-channel")
        self.start_sending = sending
        self.sending: SendingProcess | None = None
        self.webhooks_here = 0

    @property
    def full(self) -> bool:
        return len(self.in_flight) >= self.concurrency

    def start(
        self,
        row: Notification,
        *,
        endpoint: WebhookEndpoint | None,
        slot_of: Any,
        now: datetime,
        deferred: Mapping[str, Deferral],
        elsewhere: frozenset[str],
    ) -> None:
        """Deliver the row on a worker, or a lone webhook in the sending process once the
        tick has one; `slot_of`: the endpoint whose slot it holds."""
        future = self._send_elsewhere(
            row, endpoint=endpoint, now=now, deferred=deferred, elsewhere=elsewhere
        )
        if future is None:
            future = self.rows.submit(
                deliver_row,
                row,
                endpoint=endpoint,
                now=now,
                senders=self.senders,
                pool=self.channels,
                timeout=self.timeout,
                deferred=deferred,
                elsewhere=elsewhere,
            )
        self.in_flight[future] = (row, slot_of)

    def _send_elsewhere(
        self,
        row: Notification,
        *,
        endpoint: WebhookEndpoint | None,
        now: datetime,
        deferred: Mapping[str, Deferral],
        elsewhere: frozenset[str],
    ) -> Future | None:
        """The row's webhook handed to the sending process when it is the row's one channel
        here and at least half the tick's workers' worth of deliveries are in flight
        (started once the tick has sent a few waves of such webhooks itself, used once it
        is up); None: the tick sends it."""
        if self.start_sending is None:
            return None
        if 2 * len(self.in_flight) < self.concurrency:
            # Few deliveries in flight: the tick's core is not the limit, and the hand-over's
            # extra hops would cost each delivery more time than the second core frees.
            return None
        here = [c for c in channels_to_send(row, deferred) if c not in elsewhere]
        if here != [Channel.WEBHOOK] or endpoint is None or not endpoint.enabled:
            return None
        if self.sending is None:
            self.webhooks_here += 1
            if self.webhooks_here <= WAVES_BEFORE_A_PROCESS * self.concurrency:
                return None
            try:
                self.sending = self.start_sending()
            except OSError as exc:  # no process to be had: the tick sends them all itself
                logger.warning("no sending process (%s): the tick sends its webhooks", exc)
                self.start_sending = None
                return None
            if self.sending is None:  # not now (no core to spare): asked again later
                return None
        if not self.sending.accepting:
            return None
        message = webhook.message(row, endpoint=endpoint, now=now)
        if isinstance(message, DeliveryResult):  # nothing to send: the worker records why
            return None
        delivered = functools.partial(_webhook_delivery, row, attempted_at=now, deferred=deferred)
        return self.sending.submit(message, timeout=self.timeout, then=delivered)

    def flush(self) -> None:
        """Hand the sending process the webhooks queued for it this step."""
        if self.sending is not None:
            self.sending.flush()

    def back(
        self, done: set[Future]
    ) -> Iterator[tuple[Notification, Any, RowDelivery | Exception]]:
        """The rows of `done` that were this lane's: each with the endpoint whose slot it
        held and its delivery (or what it raised: one bad row must not stop the tick)."""
        for future in done & self.in_flight.keys():
            row, slot_of = self.in_flight.pop(future)
            try:
                yield row, slot_of, future.result()
            except Exception as exc:
                yield row, slot_of, exc

    def close(self) -> None:
        self.rows.shutdown(wait=False, cancel_futures=True)
        self.channels.shutdown(wait=False, cancel_futures=True)
        if self.sending is not None:
            self.sending.close()


def _webhook_delivery(
    row: Notification,
    result: DeliveryResult,
    *,
    attempted_at: datetime,
    deferred: Mapping[str, Deferral],
) -> RowDelivery:
    """What deliver_row returns for a row whose webhook was its one channel here."""
    return RowDelivery(
        notification=row,
        results={Channel.WEBHOOK: result},
        attempted_at=attempted_at,
        deferred=deferred,
    )
