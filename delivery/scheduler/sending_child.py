"""The tick's sending process, its own side (sending_process.py is the tick's): it sends
each webhook it is handed and answers with the result, until its socket closes.

It imports what sending needs and nothing of Django (no settings, no models): the sooner it
is up, the fewer of a burst's webhooks the tick sends itself while it starts.
"""

import os
import queue
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

from delivery.transports.base import WebhookMessage
from delivery.transports.webhook import send_webhook
from outbound.connections import Connections


def serve(descriptor: int, concurrency: int) -> None:
    """Send each webhook handed over on `descriptor` on `concurrency` threads and answer
    with its result, until the socket closes."""
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)
    connection = Connection(descriptor)
    answers: queue.SimpleQueue = queue.SimpleQueue()

    def answer() -> None:
        while True:
            batch = [answers.get()]
            while not answers.empty():
                batch.append(answers.get())
            try:
                connection.send(batch)
            except OSError:
                os._exit(0)

    kept = Connections(per_origin=concurrency, origins=256)
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="send")
    try:
        connection.send([])  # up: the tick may hand webhooks over
    except OSError:
        os._exit(0)  # the tick ended before it needed us
    threading.Thread(target=answer, name="answers", daemon=True).start()

    def send(request_id: int, message: WebhookMessage, timeout: float, allow_private: bool):
        result = send_webhook(
            message, timeout=timeout, connections=kept, allow_private=allow_private
        )
        answers.put((request_id, result))

    while True:
        try:
            batch = connection.recv()
        except (EOFError, OSError):
            os._exit(0)  # the tick is done with us (or gone): nothing is left to answer
        for request in batch:
            pool.submit(send, *request)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
