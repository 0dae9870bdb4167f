"""`manage.py demo_receiver --port N`: the local webhook receiver `manage.py demo` runs."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dbqueue.signals import stop_on_signals
from operations.demo.receiver import endpoint_secrets, receiver

HOST = "127.0.0.1"


class Command(BaseCommand):
    help = "Receive the demo's webhooks on 127.0.0.1 and print each verified delivery."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, required=True)

    def handle(self, *args: Any, port: int, **options: Any) -> None:
        base_url = f"http://{HOST}:{port}"
        server = receiver(
            host=HOST, port=port, out=self.stdout, secrets=lambda: endpoint_secrets(base_url)
        )
        self.stdout.write(f"receiving webhooks at {base_url}/hook")
        with server, stop_on_signals(server.shutdown):
            server.serve_forever(poll_interval=0.2)
