"""http.post against real servers on 127.0.0.1: timeouts, redirects, body cap, SSRF vetting
and address pinning. Names are resolved by a fake getaddrinfo: no traffic leaves the host."""

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import urllib3.util.connection

from outbound import http
from tests.support.http_server import Reply, recording_server
from tests.support.resolvers import fake_resolver


@contextmanager
def dripping_server(*, stage: str, interval: float) -> Iterator[str]:
    """A server that answers one byte at a time, forever: in the status/headers when
    `stage` is "headers", in a huge declared body when it is "body"."""
    head = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"p" * 400 + b"\r\nContent-Length: 100000000\r\n\r\n"
    sent_first, drip = (b"", head) if stage == "headers" else (head, b"x" * 100_000_000)
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(sent_first)
            for index in range(len(drip)):
                if stop.wait(interval):
                    return
                try:
                    connection.sendall(drip[index : index + 1])
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/drip"
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=2)


def post(url, **overrides):
    arguments = {"body": b"{}", "headers": {}, "timeout": 2.0, "vet_addresses": False}
    return http.post(url, **{**arguments, **overrides})


def test_request_reaches_a_local_server_when_vetting_is_off():
    with recording_server(lambda request: Reply(201, {"X-Answer": "yes"}, b"created")) as server:
        response = post(f"{server.url}/hook?a=1", body=b'{"x":1}', headers={"X-Test": "t"})
    assert (response.status, response.body) == (201, b"created")
    assert response.headers["x-answer"] == "yes"
    [received] = server.received()
    assert (received.method, received.path, received.body) == ("POST", "/hook?a=1", b'{"x":1}')
    assert received.headers["x-test"] == "t"
    assert received.headers["user-agent"] == "Tickwork/1.0"


def test_a_given_user_agent_replaces_the_default():
    with recording_server() as server:
        post(server.url, headers={"user-agent": "Custom/2"})
    assert server.received()[0].headers["user-agent"] == "Custom/2"


def test_redirect_is_returned_not_followed():
    def responder(request):
        return Reply(302, {"Location": "/elsewhere"}) if request.path == "/hook" else Reply()

    with recording_server(responder) as server:
        response = post(f"{server.url}/hook")
    assert response.status == 302
    assert server.received("/elsewhere") == []


def test_body_beyond_max_body_is_not_read():
    with recording_server(lambda request: Reply(body=b"x" * 2_000_000)) as server:
        assert len(post(server.url).body) == 4096
        assert post(server.url, max_body=10).body == b"x" * 10


def test_hung_server_is_cut_at_the_timeout():
    with (
        recording_server(lambda request: Reply(delay=5)) as server,
        pytest.raises(http.HttpError) as excinfo,
    ):
        post(f"{server.url}/hook?token=s3cret", timeout=0.5)
    assert excinfo.value.category == "timeout"
    assert str(excinfo.value) == f"timed out after 0.5s contacting {server.url}"


@pytest.mark.parametrize("stage", ["headers", "body"])
def test_server_dripping_bytes_is_cut_at_the_overall_timeout(stage):
    # Each byte arrives well within the per-read timeout; only an overall deadline ends it.
    with (
        dripping_server(stage=stage, interval=0.05) as url,
        pytest.raises(http.HttpError) as excinfo,
    ):
        post(url, timeout=0.5, max_body=1_000_000)
    assert excinfo.value.category == "timeout"


def test_refused_connection_is_a_connection_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(http.HttpError) as excinfo:
        post(f"http://127.0.0.1:{port}/hook?key=s3cret")
    assert excinfo.value.category == "connection"
    assert "s3cret" not in str(excinfo.value)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/", "http:///nohost", "http://user:pw@example.com/", "http://h:port/"],
)
def test_invalid_urls_are_refused_before_connecting(url):
    with pytest.raises(http.HttpError) as excinfo:
        post(url, vet_addresses=True)
    assert excinfo.value.category == "invalid_request"
    assert "pw" not in str(excinfo.value)


def test_vetting_refuses_a_name_resolving_to_loopback_before_connecting(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver({"hooks.example.com": ["127.0.0.1"]}))
    with recording_server() as server:
        port = server.url.rsplit(":", 1)[1]
        with pytest.raises(http.HttpError) as excinfo:
            post(f"http://hooks.example.com:{port}/hook", vet_addresses=True)
        assert server.received() == []
    assert excinfo.value.category == "ssrf_blocked"


def test_vetting_refuses_when_any_address_is_private(monkeypatch):
    table = {"hooks.example.com": ["93.184.216.34", "10.0.0.5"]}
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver(table))
    with pytest.raises(http.HttpError) as excinfo:
        post("https://hooks.example.com/hook", vet_addresses=True)
    assert excinfo.value.category == "ssrf_blocked"


def test_unresolvable_name_is_a_connection_error(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver({}))
    with pytest.raises(http.HttpError) as excinfo:
        post("https://nowhere.example.com/hook", vet_addresses=True)
    assert excinfo.value.category == "connection"


def test_connection_goes_to_the_vetted_address_resolved_once(monkeypatch):
    """A rebinding resolver answers public first, loopback afterwards: the request must go to
    the address that was vetted, with the original Host header, and never re-resolve."""
    answers = [["93.184.216.34"], ["127.0.0.1"]]
    resolutions = []

    def rebinding_getaddrinfo(host, port, *args, **kwargs):
        resolutions.append(host)
        return fake_resolver({host: answers[min(len(resolutions), 2) - 1]})(host, port)

    connected_to = []
    with recording_server() as server:
        local_port = int(server.url.rsplit(":", 1)[1])

        def create_connection(address, *args, **kwargs):
            # Stand-in for the network: record the destination, reach the local server.
            connected_to.append(address)
            sock = socket.socket()
            sock.settimeout(2)
            sock.connect(("127.0.0.1", local_port))
            return sock

        monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
        monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
        response = post("http://hooks.example.com/hook?q=1", vet_addresses=True)

    assert response.status == 200
    assert resolutions == ["hooks.example.com"]
    assert connected_to == [("93.184.216.34", 80)]
    [received] = server.received()
    assert received.path == "/hook?q=1"
    assert received.headers["host"] == "hooks.example.com"
