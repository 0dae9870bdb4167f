"""Pure decisions of the scheduler: classify a row's channel results, pick the backoff, decide
whether to dead-letter, and summarise errors safely. No database, no I/O."""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from django.db import models

from notifications.states import DeadLetterReason
from outbound.categories import ErrorCategory


class ChannelResult(Protocol):
    """The fields of transports.base.DeliveryResult these decisions read."""

    ok: bool
    error: str
    permanent: bool
    category: str
    http_status: int | None
    retry_after: float | None
    backpressure: bool


class Verdict(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILURE = "failure"


@dataclass(frozen=True)
class Classification:
    """A row's outcome. `failed` lists the failed channels in the row's channel order;
    `all_permanent` is true only for a full failure whose every error is permanent;
    `all_rate_limited` for one whose every error is a provider's push-back past the deferral
    horizon; `retry_after` is the longest Retry-After any failed channel asked for (seconds)."""

    verdict: Verdict
    failed: tuple[str, ...]
    all_permanent: bool
    retry_after: float | None
    all_rate_limited: bool = False


def classify(results: Mapping[str, ChannelResult]) -> Classification:
    """Full success: no channel failed (also when there were none). Partial: some delivered,
    some failed. Full failure: every channel failed. Only a full failure earns a retry."""
    failed = tuple(channel for channel, result in results.items() if not result.ok)
    succeeded = len(results) - len(failed)
    if not failed:
        verdict = Verdict.SUCCESS
    elif succeeded:
        verdict = Verdict.PARTIAL
    else:
        verdict = Verdict.FAILURE
    waits = [results[c].retry_after for c in failed if results[c].retry_after is not None]
    return Classification(
        verdict=verdict,
        failed=failed,
        all_permanent=verdict is Verdict.FAILURE and all(results[c].permanent for c in failed),
        retry_after=max(waits) if waits else None,
        all_rate_limited=verdict is Verdict.FAILURE
        and all(results[c].backpressure for c in failed),
    )


class DeferralReason(models.TextChoices):
    """Why a channel of an occurrence was deferred unattempted (a deferred delivery-log
    row's category)."""

    CIRCUIT_OPEN = "circuit_open", "Endpoint circuit open"
    SEND_BUDGET = "send_budget", "No email send budget"
    RATE_LIMITED = ErrorCategory.RATE_LIMITED.value, "Provider asked to wait (Retry-After)"


def dead_letter_reason(
    classification: Classification, *, error_count_after: int, max_attempts: int
) -> DeadLetterReason | None:
    """Why a full failure is dead-lettered now, or None when it should back off (or when
    the row did not fully fail at all)."""
    if classification.verdict is not Verdict.FAILURE:
        return None
    if classification.all_permanent:
        return DeadLetterReason.PERMANENT
    if error_count_after >= max_attempts:
        if classification.all_rate_limited:
            return DeadLetterReason.RATE_LIMITED
        return DeadLetterReason.EXHAUSTED
    return None


def is_poison(*, unfinished_claims: int, max_attempts: int) -> bool:
    """A row whose count of claims without an outcome (this claim included) exceeds
    `max_attempts`: its previous `max_attempts` claims all died before writing back."""
    return unfinished_claims > max_attempts


def describe(result: ChannelResult) -> str:
    """One channel's failure in a few safe words: "HTTP 500", "timeout", "connection"."""
    if result.http_status is not None:
        return f"HTTP {result.http_status}"
    return result.category or "failed"


def error_summary(results: Mapping[str, ChannelResult]) -> str:
    """The failed channels as "webhook: HTTP 500; email: timeout" (no bodies, no URLs)."""
    return "; ".join(
        f"{channel}: {describe(result)}" for channel, result in results.items() if not result.ok
    )


def partial_summary(classification: Classification) -> str:
    return "partial: " + ", ".join(classification.failed)
