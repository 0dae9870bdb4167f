"""The row lane's claims: when it claims, how many rows, and when its queue counts as drained.

A claim is made for the workers that are free now (in batches: at least half of them, or any
once nothing runs), or for the queues of fast endpoints that run low (`gate.refills`), never
ahead while rows wait for a worker. A short claim drained the queue only if it took every row
it ranked; an endpoint that took its full share, or whose rows were left for later (skipped,
or given back), brings the next claim once it can take more.
"""

from collections import Counter
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import Claimed
from notifications.scheduler.context import Tick
from notifications.scheduler.gate import ClaimLimits, EndpointGate


class RowClaims:
    def __init__(
        self,
        tick: Tick,
        *,
        gate: EndpointGate,
        claim: Callable[..., Claimed],
        leave: Q | None,
    ) -> None:
        """`claim` claims due rows (notification_claim); `leave`: the rows other lanes
        claim."""
        self.tick, self.gate, self.notification_claim, self.leave = tick, gate, claim, leave
        self.exhausted = False
        # Rows of busy endpoints were left for later (not claimed, or released), so coming
        # up short did not mean nothing is due: claim again once one of their slots frees.
        self.left_for_later = False
        # The endpoints the last claim took a full share of: more of their rows may be due.
        self.capped: set[Any] = set()

    def wanted(self, *, free: int, running: int, queued: int) -> bool:
        """Whether to claim now, with `free` workers, `running` rows in flight and `queued`
        waiting for a worker."""
        concurrency = self.tick.config.concurrency
        return (
            not self.exhausted
            and self.tick.may_claim()
            and ((free > 0 and (free * 2 >= concurrency or not running)) or self._refills(queued))
        )

    def take(self, *, free: int, queued: int) -> Claimed | None:
        """Claim what the free workers and the fast endpoints' queues have room for (no more
        of one endpoint's rows than it can start or hold waiting); None when the connection
        was lost."""
        tick, now = self.tick, self.tick.clock.now()
        limits = self.gate.claim_limits(now=now)
        extra = 0 if queued else limits.extra
        wanted = tick.claim_room(min(max(free, 0) + extra, tick.config.batch))
        try:
            claimed = self.notification_claim(
                now=now,
                lease=tick.config.lease,
                limit=wanted,
                skip_endpoints=limits.skip,
                per_endpoint=tick.config.endpoint_share,
                endpoint_caps=limits.caps,
                only=~self.leave if self.leave is not None else None,
            )
        except DatabaseError as exc:
            if tick.lose(exc):
                return None
            raise
        self._note(claimed, wanted=wanted, limits=limits)
        tick.summary.claimed += len(claimed)
        return claimed

    def started(self) -> None:
        """The claimed rows started: short of rows, yet an endpoint that took its full share
        can take more at once (its rows were deferred, say): claim again rather than wait."""
        now = self.tick.clock.now()
        if any(self.gate.wants_more(endpoint_id, now=now) for endpoint_id in self.capped):
            self.exhausted = False

    def finished(self, endpoint_id: Any) -> None:
        """A delivery to the endpoint came back: claim again once an endpoint whose rows were
        left can take more — not on every delivery (each claim ranks every due row), but when
        its queue runs low."""
        now = self.tick.clock.now()
        if self.left_for_later and self.gate.wants_more(endpoint_id, now=now):
            self.exhausted = False

    def _refills(self, queued: int) -> int:
        # Rows queued for a worker mean the workers, not the endpoints, are the limit:
        # claiming ahead for the endpoints' queues would only make rows wait longer here.
        return 0 if queued else self.gate.refills(now=self.tick.clock.now())

    def _note(self, claimed: Claimed, *, wanted: int, limits: ClaimLimits) -> None:
        per_endpoint = Counter(row.webhook_endpoint_id for row in claimed)
        per_endpoint.pop(None, None)
        # A short claim drained the queue only if no other tick took rows it ranked; one
        # that took an endpoint's full share may have left more of its rows due.
        short = len(claimed) < wanted
        self.exhausted = short and claimed.drained
        self.capped = self.gate.claimed(per_endpoint, limits, full=not short)
        self.left_for_later = bool(limits.skip or self.capped)
