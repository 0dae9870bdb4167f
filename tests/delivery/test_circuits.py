"""The circuit-open predicate: the database's filter, the breaker's circuit and the
endpoint's health agree; at `circuit_open_until` itself the circuit is no longer open."""

from datetime import timedelta

import pytest

from delivery.circuits import circuit_of, circuit_open, is_circuit_open
from delivery.models import EndpointHealth, WebhookEndpoint
from tests.jobs.factories import NOW, make_endpoint

UNTIL = {
    "closed": None,
    "ended": NOW - timedelta(seconds=1),
    "half-open": NOW,
    "open": NOW + timedelta(seconds=60),
}


@pytest.fixture
def endpoints(alice) -> dict[str, WebhookEndpoint]:
    made = {}
    for name, until in UNTIL.items():
        endpoint = make_endpoint(alice.tenant)
        endpoint.circuit_open_until = until
        endpoint.save(update_fields=["circuit_open_until"])
        made[name] = endpoint
    return made


def test_only_a_circuit_open_past_now_is_open_everywhere(endpoints):
    ids = set(WebhookEndpoint.objects.filter(circuit_open(now=NOW)).values_list("pk", flat=True))

    assert {name for name, e in endpoints.items() if e.pk in ids} == {"open"}
    for name, endpoint in endpoints.items():
        is_open = name == "open"
        assert is_circuit_open(endpoint.circuit_open_until, now=NOW) is is_open
        assert circuit_of(endpoint).is_open(NOW) is is_open
        assert (endpoint.health(now=NOW) == EndpointHealth.OPEN) is is_open
