"""Address pinning over TLS: the connection goes to the vetted IP while SNI and the
certificate check stay bound to the URL's hostname. A local TLS server with a throwaway
certificate for hooks.example.test stands in for the endpoint."""

import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from outbound import http
from tests.support.resolvers import fake_resolver

HOSTNAME = "hooks.example.test"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={HOSTNAME}",
         "-addext", f"subjectAltName=DNS:{HOSTNAME}"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(certificate):
    """Yields (port, seen) where seen records the SNI name and Host header of each request."""
    seen: list[tuple[str | None, str]] = []
    sni_names: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((sni_names[-1], self.headers["Host"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    context.sni_callback = lambda sock, name, ctx: sni_names.append(name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def loopback_admitted(monkeypatch):
    """Resolve test names to 127.0.0.1 and let the vetting admit it, so the pinned TLS path
    can be exercised without leaving the machine."""
    table = {HOSTNAME: ["127.0.0.1"], "other.example.test": ["127.0.0.1"]}
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver(table))
    monkeypatch.setattr(http, "is_public_address", lambda address: True)


def test_pinned_tls_connection_keeps_sni_host_and_certificate_check(
    tls_server, certificate, loopback_admitted
):
    port, seen = tls_server
    response = http.post(
        f"https://{HOSTNAME}:{port}/hook",
        body=b"{}",
        headers={},
        timeout=2,
        vet_addresses=True,
        ca_bundle=str(certificate[0]),
    )
    assert response.status == 204
    assert seen == [(HOSTNAME, f"{HOSTNAME}:{port}")]


def test_certificate_for_another_name_is_refused(tls_server, certificate, loopback_admitted):
    port, seen = tls_server
    with pytest.raises(http.HttpError) as excinfo:
        http.post(
            f"https://other.example.test:{port}/hook",
            body=b"{}",
            headers={},
            timeout=2,
            vet_addresses=True,
            ca_bundle=str(certificate[0]),
        )
    assert excinfo.value.category == "connection"
    assert "certificate" in str(excinfo.value)
    assert seen == []
