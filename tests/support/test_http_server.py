"""The test HTTP server records complete requests only: a client that dies mid-send has
not delivered anything, and `settled` tells when every connection so far is handled."""

import socket

from tests.faults.workers import wait_until
from tests.support.http_server import recording_server


def _send(url: str, raw: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(raw)


def test_a_request_cut_off_mid_body_is_not_recorded():
    with recording_server() as server:
        _send(server.url, b'POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"par')
        wait_until(server.settled, timeout=10)

        assert server.received() == []


def test_a_complete_request_is_recorded_before_the_server_settles():
    with recording_server() as server:
        _send(server.url, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        wait_until(server.settled, timeout=10)

        [request] = server.received()
        assert (request.path, request.body) == ("/hook", b"{}")
