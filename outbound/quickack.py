"""Answers read without the sender's delayed acknowledgement.

Many receivers (Python's http.server, Werkzeug's development server, small Node servers)
write an answer's headers and its body in two writes with Nagle's algorithm on: the body
waits until the headers are acknowledged. On a kept-alive connection Linux delays that
acknowledgement (it is in "pingpong" mode, hoping to piggyback it on the next request) by
about 40 ms, so every exchange with such a receiver took 40 ms whatever the receiver's
speed. Setting TCP_QUICKACK once the request is sent makes the kernel acknowledge the
answer's first segment as it arrives; the option does not stick (the next exchange enters
pingpong mode again), hence once per exchange. Elsewhere the option does not exist, and
nothing changes.
"""

import contextlib
import socket

from urllib3.connection import HTTPConnection
from urllib3.response import HTTPResponse

_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class QuickAckConnection(HTTPConnection):
    """A urllib3 connection (plain or TLS) whose kernel acknowledges an answer at once."""

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]
        if _TCP_QUICKACK is not None and self.sock is not None:
            # A socket the peer already closed cannot take the option: the read says so.
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        return super().getresponse()
