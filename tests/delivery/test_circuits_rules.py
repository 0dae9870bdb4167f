"""The circuit breaker's rules, as pure functions."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.circuits import Circuit, Signal, after, signal_of

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def fail(circuit: Circuit, times: int, *, at: datetime = NOW) -> Circuit:
    for _ in range(times):
        circuit = after(circuit, Signal.FAILED, now=at, threshold=5)
    return circuit


@pytest.mark.parametrize(
    ("ok", "category", "signal"),
    [
        (True, "", Signal.ALIVE),
        (False, "http_4xx", Signal.REJECTED),
        (False, "http_3xx", Signal.REJECTED),
        (False, "http_5xx", Signal.FAILED),
        (False, "timeout", Signal.FAILED),
        (False, "connection", Signal.FAILED),
        (False, "ssrf_blocked", None),
        (False, "internal", None),
    ],
)
def test_only_transport_failures_count_against_an_endpoint(ok, category, signal):
    assert signal_of(ok=ok, category=category) is signal


def test_it_opens_for_a_minute_at_the_threshold_and_not_before():
    assert not fail(Circuit(), 4).is_open(NOW)

    opened = fail(Circuit(), 5)

    assert opened.is_open(NOW)
    assert opened.open_until == NOW + timedelta(minutes=1)
    assert opened.consecutive_failures == 5


def test_a_failed_probe_reopens_it_for_twice_as_long_up_to_an_hour():
    circuit = fail(Circuit(), 5)
    intervals = []
    for _ in range(8):
        probe_at = circuit.open_until
        assert circuit.is_half_open(probe_at, threshold=5)
        circuit = fail(circuit, 1, at=probe_at)
        intervals.append((circuit.open_until - probe_at).total_seconds())

    assert intervals == [120, 240, 480, 960, 1920, 3600, 3600, 3600]


def test_failures_while_open_do_not_extend_it():
    opened = fail(Circuit(), 5)

    assert fail(opened, 3, at=NOW + timedelta(seconds=10)).open_until == opened.open_until


def test_a_success_closes_it_and_resets_the_interval():
    circuit = fail(fail(Circuit(), 5), 1, at=NOW + timedelta(minutes=2))

    closed = after(circuit, Signal.ALIVE, now=NOW + timedelta(minutes=5), threshold=5)

    assert closed.healthy
    assert fail(closed, 5).open_until == NOW + timedelta(minutes=1)


def test_a_rejection_closes_the_circuit_but_counts_as_a_failed_delivery():
    circuit = fail(Circuit(), 5)

    rejected = after(circuit, Signal.REJECTED, now=NOW + timedelta(minutes=2), threshold=5)

    assert not rejected.is_open(NOW + timedelta(minutes=2))
    assert rejected.consecutive_failures == 0
    assert rejected.failed_deliveries == 6
    assert rejected.last_failure_at == NOW + timedelta(minutes=2)
    assert not rejected.healthy


def test_rejections_never_open_the_circuit_and_a_success_clears_them():
    circuit = Circuit()
    for _ in range(20):
        circuit = after(circuit, Signal.REJECTED, now=NOW, threshold=5)

    assert circuit.open_until is None
    assert circuit.failed_deliveries == 20
    assert after(circuit, Signal.ALIVE, now=NOW, threshold=5).healthy
