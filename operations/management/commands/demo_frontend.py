"""`manage.py demo_frontend --port N`: serve the example front end as `manage.py demo` does."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from dbqueue.signals import stop_on_signals
from operations.demo.frontend import front_end_server

HOST = "127.0.0.1"


class Command(BaseCommand):
    help = "Serve examples/frontend on 127.0.0.1 (open it as http://localhost:<port>/)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, required=True)

    def handle(self, *args: Any, port: int, **options: Any) -> None:
        root = settings.BASE_DIR / "examples" / "frontend"
        server = front_end_server(host=HOST, port=port, root=root)
        self.stdout.write(
            f"serving {root.relative_to(settings.BASE_DIR)} at http://localhost:{port}/"
        )
        with server, stop_on_signals(server.shutdown):
            server.serve_forever(poll_interval=0.2)
