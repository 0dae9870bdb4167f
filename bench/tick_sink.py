"""A fast local webhook sink for the benchmarks: answers every POST with 200.

Run as `python bench/tick_sink.py [--record FILE] [--two-writes]`; it prints its port on the
first line of stdout and serves on 127.0.0.1 until killed. With --record it appends
`<unix time> <webhook-id>` to FILE for every request (arrival order and lateness). With
--two-writes it answers as Python's http.server and Werkzeug's development server do: the
status line and headers in one write, the body in another, Nagle on.
"""

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = {"file": None, "lock": threading.Lock()}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The status line and headers go out in one write, the body in another: with Nagle on,
    # the body waits for the client's delayed ACK (40 ms) on every kept-alive connection.
    # Production web servers send without Nagle too.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if RECORD["file"] is not None:
            with RECORD["lock"]:
                RECORD["file"].write(f"{time.time():.6f} {self.headers.get('webhook-id')}\n")
                RECORD["file"].flush()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


class TwoWritesSink(Sink):
    disable_nagle_algorithm = False


def main() -> None:
    arguments = sys.argv[1:]
    if arguments[:1] == ["--record"]:
        RECORD["file"] = open(arguments[1], "a")  # noqa: SIM115 - open for the server's life
    server = Server(("127.0.0.1", 0), TwoWritesSink if "--two-writes" in arguments else Sink)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
