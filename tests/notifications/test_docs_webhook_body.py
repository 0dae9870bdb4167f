"""docs/api.md's `notification.fired` (its table and its example) names exactly the fields
a real send of a plain notification's webhook carries."""

import json
import re

import pytest
from django.utils.timezone import now as utc_now
from standardwebhooks import Webhook

from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint
from tests.support.http_server import recording_server
from tests.support.processes import ROOT

pytestmark = pytest.mark.usefixtures("local_channels")

SECTION = "### What a notification's webhook says"


def _documented() -> tuple[set[str], dict]:
    """The table's field names (`data.x` for a field of `data`) and the JSON example."""
    api = (ROOT / "docs" / "api.md").read_text()
    section = api[api.index(SECTION) : api.index("\n## ", api.index(SECTION))]
    fields = set(re.findall(r"^\| `([a-z_.]+)` \|", section, flags=re.MULTILINE))
    [example] = re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)
    return fields, json.loads(example)


def _field_names(event: dict) -> set[str]:
    return {*event, *(f"data.{name}" for name in event["data"])} - {"data"}


def test_the_documented_fields_are_those_a_sent_notification_carries(alice):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=alice.tenant, url=f"{server.url}/hook")
        response = alice.client().post(
            "/v1/notifications",
            {
                "channels": ["webhook"],
                "webhook_endpoint": str(endpoint.id),
                "subject": "Hi",
                "body": "Body",
            },
            format="json",
            headers={"Idempotency-Key": "fired"},
        )
        assert response.status_code == 201, response.json()

        run_tick(now=utc_now())

        [request] = server.received("/hook")
    sent = Webhook(endpoint.secret).verify(request.body, request.headers)
    fields, example = _documented()

    assert sent["type"] == example["type"] == "notification.fired"
    assert sent["data"]["notification_id"] == response.json()["id"]
    assert fields == _field_names(sent)
    assert _field_names(example) == _field_names(sent)
