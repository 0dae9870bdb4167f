"""The demo's local webhook receiver: it checks each delivery's Standard Webhooks signature
with the secrets of the webhook endpoints that point at it, as a real receiver would, and
prints one line per delivery.

The secrets are read from the database at each delivery, so an endpoint created (or a
secret rotated) through the API while the demo runs is verified without a restart.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from django.db import close_old_connections
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError

from delivery.models import WebhookEndpoint
from operations.demo.supervisor import TextSink

MAX_BODY_BYTES = 1 << 20


def verified_event(
    body: bytes, headers: Mapping[str, str], secrets: Iterable[str]
) -> dict[str, Any] | None:
    """The delivery's event when one of `secrets` signed it (and its timestamp is recent),
    else None. `headers` must have lower-case names."""
    for secret in secrets:
        try:
            return Webhook(secret).verify(body, dict(headers))
        except WebhookVerificationError:
            continue
    return None


def endpoint_secrets(base_url: str) -> list[str]:
    """The secrets that sign deliveries to any endpoint under `base_url` right now."""
    close_old_connections()
    now = timezone.now()
    endpoints = WebhookEndpoint.objects.filter(url__startswith=base_url)
    return [secret for endpoint in endpoints for secret in endpoint.signing_secrets(now=now)]


def describe(event: Mapping[str, Any], webhook_id: str) -> str:
    """One line for a verified delivery: its id, event type and, if any, subject."""
    data = event.get("data")
    if not isinstance(data, dict):
        data = {}
    subject = f" subject={json.dumps(data['subject'])}" if "subject" in data else ""
    return f"verified webhook-id={webhook_id} type={event.get('type')}{subject}"


def receiver(
    *, host: str, port: int, out: TextSink, secrets: Callable[[], list[str]]
) -> HTTPServer:
    """An HTTP server on host:port that answers 204 to a verified delivery and 400 to
    anything else, writing one line per POST to `out`."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY_BYTES))
            headers = {name.lower(): value for name, value in self.headers.items()}
            webhook_id = headers.get("webhook-id", "-")
            event = verified_event(body, headers, secrets())
            if event is None:
                out.write(f"rejected webhook-id={webhook_id}: the signature does not verify\n")
            else:
                out.write(describe(event, webhook_id) + "\n")
            out.flush()
            self.send_response(204 if event is not None else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return HTTPServer((host, port), Handler)
