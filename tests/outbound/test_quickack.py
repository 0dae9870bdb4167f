"""Receivers that write their answer in one piece or in two (headers, then the body with
Nagle on, as Python's http.server does), with and without keep-alive: every exchange gets
its whole answer, kept-alive connections are reused, and the sender asks its kernel to
acknowledge each answer at once (TCP_QUICKACK) so a two-write receiver's body is not held
for the sender's delayed acknowledgement. Assertions are on counts and calls, never time."""

import socket
from typing import Any

import pytest
from urllib3.connectionpool import HTTPConnectionPool

from outbound import http
from outbound.connections import Connections
from outbound.quickack import QuickAckConnection
from tests.support.http_server import Reply, recording_server

EXCHANGES = 20


@pytest.mark.parametrize("keep_alive", [True, False], ids=["keep-alive", "close"])
@pytest.mark.parametrize("nagle", [False, True], ids=["one-write", "two-writes"])
def test_every_exchange_gets_its_whole_answer(nagle, keep_alive):
    reply = Reply(200, body=b'{"received": true}')
    with recording_server(lambda request: reply, nagle=nagle, keep_alive=keep_alive) as server:
        with Connections(per_origin=1) as connections:
            answers = [
                http.post(
                    f"{server.url}/hook",
                    body=b"{}",
                    headers={},
                    timeout=5.0,
                    vet_addresses=False,
                    connections=connections,
                )
                for _ in range(EXCHANGES)
            ]
        accepted = server.accepted
    assert [(a.status, a.body) for a in answers] == [(200, b'{"received": true}')] * EXCHANGES
    assert len(server.received("/hook")) == EXCHANGES
    assert accepted == (1 if keep_alive else EXCHANGES)


class _RecordingSocket:
    """The connection's socket, with the options set on it recorded."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))
        self._sock.setsockopt(level, option, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux's TCP option")
def test_each_answer_on_a_kept_alive_connection_is_acknowledged_at_once():
    class Pool(HTTPConnectionPool):
        ConnectionCls = QuickAckConnection

    with recording_server(nagle=True) as server:
        pool = Pool("127.0.0.1", port=int(server.url.rsplit(":", 1)[1]), maxsize=1)
        connection = pool._get_conn()
        connection.connect()
        recording = _RecordingSocket(connection.sock)
        connection.sock = recording
        pool._put_conn(connection)
        for _ in range(3):
            answer = pool.urlopen("POST", "/hook", body=b"{}", retries=False)
            assert (answer.status, answer.data) == (200, b"ok")
        pool.close()

    quick_ack = (socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    assert recording.options.count(quick_ack) == 3
