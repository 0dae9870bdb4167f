"""Connections kept alive by outbound.connections, against real servers on 127.0.0.1 that
count the connections they accept: reuse per host and vetted address, receivers that close
connections, and the deadline and redirect rules on a reused connection. Assertions are on
counts, never on time."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3.util.connection

from outbound import http
from outbound.connections import Connections
from tests.support.http_server import Reply, recording_server
from tests.support.resolvers import fake_resolver


def post(url, connections, **overrides):
    arguments = {"body": b"{}", "headers": {}, "timeout": 2.0, "vet_addresses": False}
    return http.post(url, connections=connections, **{**arguments, **overrides})


def test_200_posts_to_one_endpoint_share_a_few_connections():
    with recording_server() as server, Connections(per_origin=4) as connections:
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda _: post(server.url, connections).status, range(200)))
        accepted = server.accepted
    assert statuses == [200] * 200
    assert len(server.received()) == 200
    assert accepted <= 4


def test_without_connections_every_exchange_has_its_own():
    with recording_server() as server:
        for _ in range(5):
            assert http.post(server.url, body=b"{}", headers={}, timeout=2.0, vet_addresses=False)
        assert server.accepted == 5


def test_connection_close_costs_a_reconnect_and_nothing_else():
    with (
        recording_server(lambda request: Reply(200, {"Connection": "close"})) as server,
        Connections() as connections,
    ):
        statuses = [post(server.url, connections).status for _ in range(30)]
        assert statuses == [200] * 30
        assert server.accepted == 30


def test_a_receiver_closing_idle_connections_costs_a_reconnect_and_nothing_else():
    with recording_server(idle_timeout=0.05) as server, Connections() as connections:
        statuses = []
        for _ in range(5):
            statuses.append(post(server.url, connections).status)
            time.sleep(0.15)  # past the receiver's idle timeout: it closed the connection
        assert statuses == [200] * 5
        assert server.accepted == 5


@pytest.mark.parametrize("workers", [1, 4])
def test_a_receiver_racing_to_close_kept_alive_connections_loses_no_delivery(workers):
    """The receiver drops each connection a few ms after answering: a request may go out on
    a connection already closing, and is sent again on a new one."""
    with (
        recording_server(idle_timeout=0.005) as server,
        Connections() as connections,
        ThreadPoolExecutor(workers) as pool,
    ):
        statuses = list(pool.map(lambda _: post(server.url, connections).status, range(60)))
    assert statuses == [200] * 60


def test_a_redirect_on_a_reused_connection_is_still_not_followed():
    with recording_server(lambda request: Reply(302, {"Location": "/elsewhere"})) as server:
        with Connections() as connections:
            statuses = [post(f"{server.url}/hook", connections).status for _ in range(3)]
        assert statuses == [302, 302, 302]
        assert [r.path for r in server.received()] == ["/hook"] * 3
        assert server.accepted == 1


def test_the_deadline_bounds_an_exchange_on_a_reused_connection():
    calls = []

    def responder(request):
        calls.append(request)
        return Reply(200, delay=0 if len(calls) == 1 else 5)

    with recording_server(responder) as server, Connections() as connections:
        assert post(server.url, connections).status == 200
        started = time.monotonic()
        with pytest.raises(http.HttpError) as excinfo:
            post(server.url, connections, timeout=0.5)
        waited = time.monotonic() - started
    assert excinfo.value.category == "timeout"
    assert waited < 4  # cut by the deadline, not by the receiver's answer
    assert server.accepted == 1


@pytest.fixture
def network(monkeypatch):
    """Names resolved by a table the test changes; every connection, whatever address it
    is for, reaches the local server, and its destination is recorded."""
    table: dict[str, list[str]] = {}
    connected_to: list[tuple[str, int]] = []

    def getaddrinfo(host, port, *args, **kwargs):
        return fake_resolver(table)(host, port)

    def create_connection(address, *args, **kwargs):
        connected_to.append(address)
        sock = socket.socket()
        sock.settimeout(2)
        sock.connect(("127.0.0.1", network.port))
        return sock

    class Network:
        port = 0

    network = Network()
    network.table, network.connected_to = table, connected_to
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    return network


def test_a_connection_is_not_reused_for_another_host(network):
    network.table.update({"a.example.com": ["93.184.216.34"], "b.example.com": ["93.184.216.34"]})
    with recording_server() as server, Connections() as connections:
        network.port = int(server.url.rsplit(":", 1)[1])
        for host in ("a", "b", "a", "b"):
            post(f"http://{host}.example.com/hook", connections, vet_addresses=True)
        hosts = [r.headers["host"] for r in server.received()]
        assert server.accepted == 2
    assert hosts == ["a.example.com", "b.example.com"] * 2
    assert network.connected_to == [("93.184.216.34", 80)] * 2


def test_a_connection_is_not_reused_once_the_name_resolves_elsewhere(network):
    """The endpoint's name moves to another public address, then to a private one: the
    kept connection to the first address carries nothing for the new ones, and the private
    address is refused before any request goes out."""
    url = "http://hooks.example.com/hook"
    with recording_server() as server, Connections() as connections:
        network.port = int(server.url.rsplit(":", 1)[1])
        network.table["hooks.example.com"] = ["93.184.216.34"]
        post(url, connections, vet_addresses=True)
        post(url, connections, vet_addresses=True)
        network.table["hooks.example.com"] = ["93.184.216.35"]
        post(url, connections, vet_addresses=True)
        network.table["hooks.example.com"] = ["127.0.0.1"]
        with pytest.raises(http.HttpError) as excinfo:
            post(url, connections, vet_addresses=True)
        delivered = len(server.received())
    assert excinfo.value.category == "ssrf_blocked"
    assert delivered == 3
    assert network.connected_to == [("93.184.216.34", 80), ("93.184.216.35", 80)]


def test_a_closed_connections_keeps_nothing():
    with recording_server() as server:
        connections = Connections()
        post(server.url, connections)
        connections.close()
        post(server.url, connections)
        post(server.url, connections)
        assert server.accepted == 3
