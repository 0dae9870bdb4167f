"""Email in Resend batches, the tick's database side: which batch each claimed row's email
goes in, the batch recorded before it is sent, and its send slot taken from the shared
budget. No network I/O happens here; `send_when_due` runs in a mailer thread.

A row's email goes as one email per recipient's copy (delivery.copies), all of a row's copies
in one batch. A row whose copies are already in a recorded batch (its earlier send got no
answer, or a "later") sends them again in that identical batch, under the same key: Resend
replays its first answer instead of sending twice; a copy of it that batch does not hold
(its recipient's window was closed then) waits for the next claim. Every other email goes
in a new batch with a new key.

A recorded batch holds the emails as stored, link references where link tokens go; the
tokens are rendered into the body only on its way out (`send_when_due`), the same bytes on
every send of it (tenancy.link_tokens).
"""

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from dbqueue import pacing
from dbqueue.fences import fenced_update_many
from delivery import header_tokens
from delivery.copies import EmailCopy, outgoing_copies
from delivery.models import EmailBatch, Notification
from delivery.transports.email import copy_message, with_links
from delivery.transports.resend import (
    BATCH_LIMIT,
    PROVIDER,
    BatchAnswer,
    batch_body,
    batch_texts_mapped,
)
from tenancy.plans import any_plan_paces, tenant_limits_by_id

BatchSender = Callable[..., BatchAnswer]  # sender(body=, size=, key=, timeout=)


def member_name(row: Notification, copy: EmailCopy) -> str:
    return f"{row.pk}/{row.occurrence}/{copy.key}"


@dataclass(frozen=True)
class BatchMember:
    """A row of this tick a batch carries: its claim token, the index in the body of each
    copy it carries (by unit), and its copies that wait for the next claim (`later`)."""

    row: Notification
    token: int
    indexes: dict[str, int]
    later: tuple[str, ...] = ()


@dataclass
class OutgoingBatch:
    """A recorded batch on its way: its exact body and key, the rows of this tick it
    carries, and its send slot."""

    record: EmailBatch
    members: list[BatchMember]
    slot: datetime | None = None
    sent_at: datetime | None = field(default=None, compare=False)

    def taken_slot(self) -> datetime:
        """The send slot take_slots gave the batch; only for a batch it was given to."""
        if self.slot is None:
            raise ValueError("The batch has no send slot yet.")
        return self.slot


def compose(rows: Sequence[Notification], *, now: datetime) -> list[OutgoingBatch]:
    """Put the claimed rows' emails in batches and record each new batch (its composition
    first, then the rows naming it, fenced by their claim tokens, in one transaction). A row
    fenced out meanwhile is left out of its new batch (the tick that reclaimed it sends it)."""
    again: dict[uuid.UUID, list[Notification]] = {}
    fresh: list[Notification] = []
    for row in rows:
        (again.setdefault(row.email_batch_id, []) if row.email_batch_id else fresh).append(row)
    batches = _resent(again)
    fresh += [row for group in again.values() for row in group if not _in_any(row, batches)]
    for group in _filled(fresh):
        batch = _record_new(group, now=now)
        if batch is not None:
            batches.append(batch)
    return batches


def _in_any(row: Notification, batches: list[OutgoingBatch]) -> bool:
    return any(member.row is row for batch in batches for member in batch.members)


def _filled(rows: list[Notification]) -> Iterator[list[Notification]]:
    """The rows in groups whose copies fill a batch (BATCH_LIMIT emails at most; a row's
    copies never split: a notification names at most that many recipients)."""
    group: list[Notification] = []
    size = 0
    for row in rows:
        count = len(outgoing_copies(row, {}))
        if group and size + count > BATCH_LIMIT:
            yield group
            group, size = [], 0
        group.append(row)
        size += count
    if group:
        yield group


def _resent(groups: dict[uuid.UUID, list[Notification]]) -> list[OutgoingBatch]:
    """The recorded batches the rows' emails already belong to, to be sent again as they
    are (rows whose record was pruned, or names another occurrence, go in a new batch)."""
    if not groups:
        return []
    records = EmailBatch.objects.in_bulk(list(groups))
    batches = []
    for batch_id, rows in groups.items():
        record = records.get(batch_id)
        if record is None:
            continue
        index = {name: i for i, name in enumerate(record.members)}
        members = []
        for row in rows:
            copies = outgoing_copies(row, {})
            held = {c.unit: index[name] for c in copies if (name := member_name(row, c)) in index}
            if held:
                later = tuple(c.unit for c in copies if c.unit not in held)
                members.append(BatchMember(row, row.claim_token, held, later))
        if members:
            batches.append(OutgoingBatch(record=record, members=members))
    return batches


def _record_new(rows: list[Notification], *, now: datetime) -> OutgoingBatch | None:
    batch_id = uuid.uuid4()
    with transaction.atomic():
        naming = [(row.pk, row.claim_token, {"email_batch": batch_id}) for row in rows]
        named = fenced_update_many(Notification, naming, release=False)
        rows = [row for row in rows if row.pk in named]
        if not rows:
            return None
        copies = [(row, copy) for row in rows for copy in outgoing_copies(row, {})]
        record = EmailBatch.objects.create(
            id=batch_id,
            body=batch_body([copy_message(row, copy) for row, copy in copies]),
            members=[member_name(row, copy) for row, copy in copies],
            created_at=now,
        )
    indexes: dict[Any, dict[str, int]] = {}
    for index, (row, copy) in enumerate(copies):
        indexes.setdefault(row.pk, {})[copy.unit] = index
    for row in rows:
        row.email_batch_id = batch_id
    members = [BatchMember(row, row.claim_token, indexes.get(row.pk, {})) for row in rows]
    return OutgoingBatch(record=record, members=members)


def take_slots(batches: Sequence[OutgoingBatch], *, rate: float, now: datetime) -> None:
    """A send slot for each batch from the budget every process shares."""
    slots = pacing.reserve_slots(PROVIDER, rate=rate, count=len(batches), now=now)
    for batch, slot in zip(batches, slots, strict=True):
        batch.slot = slot


def first_free_slot() -> datetime | None:
    return pacing.next_slot(PROVIDER)


def hold(*, seconds: float, now: datetime) -> None:
    """The provider asked every sender to wait `seconds`: no slot of the budget before then."""
    pacing.hold_until(PROVIDER, until=now + timedelta(seconds=seconds), now=now)


class Holdoff:
    """What mailer threads of one tick share: the monotonic instant before which none
    sends (the provider said wait), so slots already handed out honour it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0

    def extend(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def remaining(self) -> float:
        with self._lock:
            return max(0.0, self._until - time.monotonic())


def send_when_due(
    batch: OutgoingBatch,
    *,
    send_at: float,
    latest: float,
    sender: BatchSender,
    timeout: float,
    holdoff: Holdoff,
    stop: threading.Event,
    clock: Callable[[], datetime],
) -> BatchAnswer | None:
    """Wait for the batch's slot, `send_at` (a monotonic instant: the batch may have waited
    for a mailer thread meanwhile), and any hold-off the provider asked for; then send it.
    None when nothing was sent: the tick was asked to stop first, or the wait ran past
    `latest` (a monotonic instant), after which the rows' leases would not cover the send."""
    if stop.wait(max(0.0, send_at - time.monotonic())):
        return None
    while (wait := holdoff.remaining()) > 0:
        if time.monotonic() + wait > latest or stop.wait(wait):
            return None
    if time.monotonic() > latest:
        return None
    batch.sent_at = clock()
    record = batch.record
    return sender(
        body=batch_texts_mapped(
            record.body, with_links, header_tokens.rendered_headers, header_tokens.rendered
        ),
        size=len(record.members),
        key=record.idempotency_key,
        timeout=timeout,
    )


class TenantPace:
    """A plan's `deliveries_per_second`, held across every tick process through the pacing
    machinery (`dbqueue.pacing`, a budget per tenant, as Resend's limit is). A row of such a
    tenant starts only on a send slot that is due now; otherwise it is deferred,
    unattempted, to the budget's next free slot. The budget is read before a slot is
    reserved, so a deferred row takes no slot and deferrals never push the budget ahead;
    only a row that two processes raced for the same slot takes one it cannot use."""

    def __init__(self) -> None:
        # Read once a tick per tenant (the plans themselves are cached per process).
        self._rates: dict[Any, int | None] = {}
        self._any: bool | None = None

    def rate(self, tenant_id: Any) -> int | None:
        """The tenant's plan's deliveries_per_second (None: not paced)."""
        if self._any is None:
            self._any = any_plan_paces()
        if not self._any:
            return None
        if tenant_id not in self._rates:
            self._rates[tenant_id] = tenant_limits_by_id(tenant_id).deliveries_per_second
        return self._rates[tenant_id]

    def wait(self, row: Notification, *, now: datetime) -> datetime | None:
        """None when the row may go now, else when its tenant's budget has a slot."""
        rate = self.rate(row.tenant_id)
        if rate is None:
            return None
        budget = f"plan:{row.tenant_id}"
        if rate == 0:
            return now + timedelta(seconds=PLAN_PAUSE_SECONDS)
        free = pacing.next_slot(budget)
        if free is not None and free > now:
            return free
        slot = pacing.reserve_slots(budget, rate=rate, count=1, now=now)[0]
        return None if slot <= now else slot


# A plan that allows no delivery: its rows are looked at again this often.
PLAN_PAUSE_SECONDS = 60.0
