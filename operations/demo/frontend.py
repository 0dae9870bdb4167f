"""The demo's static server for the example front end (`examples/frontend/`): the page and
its script, from their own origin, so the browser calls the API across origins as a real
front end does.

Every GET or HEAD for a path that names no file answers `index.html`: the e-mailed links
(`/signup/verify?token=…`, `/signin/verify?…`, `/invitations/accept?…`) open the page, which
reads its step from the path. Nothing is cached, so an edit shows on the next reload. No
request is logged: a link's query string is a live token.
"""

from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

INDEX = "index.html"


def front_end_server(*, host: str, port: int, root: Path) -> ThreadingHTTPServer:
    """A server on host:port for the files under `root`, `index.html` for any other path."""

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

        def translate_path(self, path: str) -> str:
            translated = super().translate_path(path)
            return translated if Path(translated).is_file() else str(root / INDEX)

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-store")
            # The page's address may hold a token: no request it makes may carry it along.
            self.send_header("Referrer-Policy", "no-referrer")
            super().end_headers()

    return ThreadingHTTPServer((host, port), Handler)
