"""The demo's static server for the example front end: its files, the page for any other
path (the emailed links open it), nothing cached, nothing outside its folder."""

import threading
import urllib.request
from collections.abc import Iterator

import pytest

from operations.demo.frontend import front_end_server


@pytest.fixture
def base(tmp_path) -> Iterator[str]:
    root = tmp_path / "frontend"
    root.mkdir()
    (root / "index.html").write_text("<!doctype html><title>page</title>")
    (root / "app.js").write_text("console.log('app');")
    (tmp_path / "secret.txt").write_text("not served")
    server = front_end_server(host="127.0.0.1", port=0, root=root)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def get(url: str) -> tuple[str, str, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode(), response.headers["Content-Type"], response.headers


def test_the_script_is_served_as_javascript(base):
    body, content_type, _ = get(f"{base}/app.js")

    assert body == "console.log('app');"
    assert content_type.startswith("text/javascript")


@pytest.mark.parametrize(
    "path", ["/", "/signup/verify?token=abc", "/invitations/accept?token=x", "/nothing/here"]
)
def test_any_other_path_is_the_page(base, path):
    body, content_type, headers = get(base + path)

    assert body == "<!doctype html><title>page</title>"
    assert content_type == "text/html"
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "no-referrer"


def test_nothing_outside_its_folder_is_served(base):
    body, _, _ = get(f"{base}/../secret.txt")

    assert "not served" not in body
