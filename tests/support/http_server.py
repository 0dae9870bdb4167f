"""A real HTTP server on 127.0.0.1 for integration tests: records every complete request and
answers with whatever the test's responder returns (status, headers, body), optionally after
a delay. A request whose body was cut off (its client died mid-send) is not a delivery: it is
neither recorded nor answered. `silent_server` is the opposite: it accepts connections and
never answers."""

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0


Responder = Callable[[RecordedRequest], Reply]


class _Server(ThreadingHTTPServer):
    """Counts the connections it has accepted and not finished with, so a test can tell
    when every byte its clients sent has been handled (`settled`)."""

    daemon_threads = True
    # Several worker processes connect at once in the concurrency tests: a deep backlog
    # keeps the kernel from refusing their connections.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._accepting = threading.Lock()
        self._open_connections = 0
        self.accepted = 0  # connections accepted so far
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        # Accepting and counting happen under one lock, so `settled` never sees a
        # connection that has left the backlog but is not counted yet. The server hands
        # every request it got here to `shutdown_request` exactly once, which uncounts it.
        with self._accepting:
            request, client_address = super().get_request()
            self._open_connections += 1
            self.accepted += 1
        return request, client_address

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        super().shutdown_request(request)
        with self._accepting:
            self._open_connections -= 1

    def settled(self) -> bool:
        """No connection waits in the backlog and every accepted one is finished."""
        with self._accepting:
            backlog = select.select([self.socket], [], [], 0)[0]
            return not backlog and self._open_connections == 0


class RecordingServer:
    """`idle_timeout`: seconds a kept-alive connection may wait, after an answer, for its
    next request before the server closes it (None: never). A new connection's first
    request and every request's body are waited for without a limit, as real servers give
    them their own, longer timeouts. `nagle`: answer as Python's http.server does by
    default, headers and body in two writes with Nagle's algorithm on; `keep_alive=False`:
    HTTP/1.0, one exchange per connection."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        idle_timeout: float | None = None,
        nagle: bool = False,
        keep_alive: bool = True,
    ) -> None:
        self.responder: Responder = responder or (lambda request: Reply())
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            # Headers and body are two writes: with Nagle on, a kept-alive connection waits
            # for the client's acknowledgement of the headers before every body.
            disable_nagle_algorithm = not nagle

            def log_message(self, *args: object) -> None:
                pass

            def parse_request(self) -> bool:
                # The request line arrived: the rest of the request is not idle time.
                self.connection.settimeout(None)
                return super().parse_request()

            def _handle(self) -> None:
                try:
                    self._answer()
                finally:
                    # Waiting for the next request line on this connection is idle time.
                    self.connection.settimeout(idle_timeout)

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if len(body) < length:
                    self.close_connection = True
                    return
                recorded = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with server._lock:
                    server.requests.append(recorded)
                reply = server.responder(recorded)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET = do_PUT = do_DELETE = _handle

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        # shutdown() waits for the serving loop's next poll: the default half second was
        # spent at the end of every test that starts one.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def start(self) -> "RecordingServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def accepted(self) -> int:
        """Connections accepted so far."""
        return self._httpd.accepted

    def settled(self) -> bool:
        """True once every connection made so far is handled: each complete request is
        recorded, each cut-off one dropped. With its clients gone (killed), that is final."""
        return self._httpd.settled()

    def received(self, path: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]


@contextmanager
def recording_server(
    responder: Responder | None = None,
    *,
    idle_timeout: float | None = None,
    nagle: bool = False,
    keep_alive: bool = True,
) -> Iterator[RecordingServer]:
    server = RecordingServer(
        responder, idle_timeout=idle_timeout, nagle=nagle, keep_alive=keep_alive
    ).start()
    try:
        yield server
    finally:
        server.stop()


class SilentServer:
    """A TCP listener on 127.0.0.1 that accepts every connection and never answers: it
    reads nothing and sends nothing, and keeps each connection open until stopped (a
    receiver that hangs after the handshake)."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._socket.settimeout(0.1)
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def accepted(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                accepted, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._connections.append(accepted)

    def start(self) -> "SilentServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self._socket.close()
        with self._lock:
            for accepted in self._connections:
                accepted.close()


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer().start()
    try:
        yield server
    finally:
        server.stop()
