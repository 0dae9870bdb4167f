"""`manage.py demo_siteverify --port N`: the local Turnstile siteverify `manage.py demo` runs."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dbqueue.signals import stop_on_signals
from operations.demo.siteverify import SITEVERIFY_PATH, siteverify_server

HOST = "127.0.0.1"


class Command(BaseCommand):
    help = "Answer Turnstile siteverify on 127.0.0.1 for Cloudflare's documented test secrets."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, required=True)

    def handle(self, *args: Any, port: int, **options: Any) -> None:
        server = siteverify_server(host=HOST, port=port)
        self.stdout.write(
            f"answering Turnstile siteverify at http://{HOST}:{port}{SITEVERIFY_PATH}"
        )
        with server, stop_on_signals(server.shutdown):
            server.serve_forever(poll_interval=0.2)
