"""Pure scheduler decisions: classification, backoff, Retry-After, dead-lettering."""

import pytest

from dbqueue.backoff import backoff_seconds, retry_delay
from delivery.scheduler import plan
from delivery.scheduler.plan import Verdict
from delivery.states import DeadLetterReason
from delivery.transports.base import DeliveryResult
from outbound.categories import ErrorCategory

OK = DeliveryResult(ok=True, http_status=200)
HTTP_500 = DeliveryResult(
    ok=False, error="HTTP 500", category=ErrorCategory.HTTP_5XX, http_status=500
)
TIMEOUT = DeliveryResult(ok=False, error="timed out", category=ErrorCategory.TIMEOUT)
HTTP_404 = DeliveryResult(
    ok=False, error="HTTP 404", category=ErrorCategory.HTTP_4XX, http_status=404, permanent=True
)
DISABLED = DeliveryResult(
    ok=False, error="disabled", category=ErrorCategory.ENDPOINT_DISABLED, permanent=True
)

DEFAULT_STEPS = (60, 300, 1800)


def test_every_channel_delivered_is_full_success():
    result = plan.classify({"email": OK, "webhook": OK})

    assert result.verdict is Verdict.SUCCESS
    assert result.failed == ()


def test_no_channels_counts_as_success():
    assert plan.classify({}).verdict is Verdict.SUCCESS


def test_some_failed_is_partial_and_lists_failed_channels():
    result = plan.classify({"email": TIMEOUT, "webhook": OK})

    assert result.verdict is Verdict.PARTIAL
    assert result.failed == ("email",)
    assert plan.partial_summary(result) == "partial: email"
    assert not result.all_permanent


def test_partial_with_a_permanent_error_is_still_partial_not_dead_letter():
    result = plan.classify({"email": OK, "webhook": HTTP_404})

    assert result.verdict is Verdict.PARTIAL
    assert plan.dead_letter_reason(result, error_count_after=1, max_attempts=3) is None


def test_all_failed_is_full_failure():
    result = plan.classify({"email": TIMEOUT, "webhook": HTTP_500})

    assert result.verdict is Verdict.FAILURE
    assert result.failed == ("email", "webhook")
    assert not result.all_permanent


def test_full_failure_all_permanent_dead_letters_at_once():
    result = plan.classify({"email": HTTP_404, "webhook": DISABLED})

    assert result.all_permanent
    assert plan.dead_letter_reason(result, error_count_after=1, max_attempts=3) == (
        DeadLetterReason.PERMANENT
    )


def test_mixed_permanent_and_transient_failure_backs_off():
    result = plan.classify({"email": HTTP_404, "webhook": HTTP_500})

    assert plan.dead_letter_reason(result, error_count_after=1, max_attempts=3) is None


@pytest.mark.parametrize(("after", "expected"), [(2, None), (3, DeadLetterReason.EXHAUSTED)])
def test_transient_failure_dead_letters_when_attempts_run_out(after, expected):
    result = plan.classify({"webhook": HTTP_500})

    assert plan.dead_letter_reason(result, error_count_after=after, max_attempts=3) == expected


@pytest.mark.parametrize(
    ("before", "seconds"), [(0, 60), (1, 300), (2, 1800), (3, 1800), (9, 1800)]
)
def test_backoff_follows_the_schedule_and_clamps_at_the_last_step(before, seconds):
    assert backoff_seconds(failures_before=before, steps=DEFAULT_STEPS) == seconds


def test_third_step_is_used_only_when_more_than_three_attempts_are_allowed():
    result = plan.classify({"webhook": HTTP_500})

    # Third failure: with 3 attempts it dead-letters; with 5 it waits the 30-minute step.
    assert plan.dead_letter_reason(result, error_count_after=3, max_attempts=3)
    assert plan.dead_letter_reason(result, error_count_after=3, max_attempts=5) is None
    assert retry_delay(failures_before=2, steps=DEFAULT_STEPS, retry_after=None) == 1800


def test_retry_after_pushes_the_retry_further_out():
    delay = retry_delay(failures_before=0, steps=DEFAULT_STEPS, retry_after=120)

    assert delay == 120


def test_retry_after_shorter_than_the_backoff_is_ignored():
    delay = retry_delay(failures_before=1, steps=DEFAULT_STEPS, retry_after=10)

    assert delay == 300


def test_classification_takes_the_longest_retry_after():
    slow = DeliveryResult(
        ok=False, category=ErrorCategory.HTTP_4XX, http_status=429, retry_after=90
    )
    slower = DeliveryResult(
        ok=False, category=ErrorCategory.HTTP_5XX, http_status=503, retry_after=200
    )

    assert plan.classify({"email": slow, "webhook": slower}).retry_after == 200


def test_error_summary_names_channels_and_safe_causes_only():
    results = {"webhook": HTTP_500, "email": TIMEOUT, "other": OK}

    assert plan.error_summary(results) == "webhook: HTTP 500; email: timeout"


@pytest.mark.parametrize(("unfinished", "crashed"), [(3, False), (4, True)])
def test_crashed_after_max_attempts_claims_without_outcome(unfinished, crashed):
    assert plan.is_crashed(unfinished_claims=unfinished, max_attempts=3) is crashed
