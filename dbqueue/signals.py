"""Graceful stop on SIGTERM and SIGINT for the worker commands."""

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals(
    stop: Callable[[], None], signals: Sequence[signal.Signals] = STOP_SIGNALS
) -> Iterator[None]:
    """While inside, `signals` (SIGTERM and SIGINT) call `stop()`; the previous handlers
    come back on exit. Signals reach only the main thread, so elsewhere (tests) nothing is
    installed.

    `stop()` runs in a short-lived thread, not in the handler: a handler runs in the main
    thread between two bytecodes, possibly inside `Event.wait()` while that thread holds
    the event's lock, and an `Event.set()` there would wait for that lock forever."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        threading.Thread(target=stop, name="stop-on-signal", daemon=True).start()

    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig in signals:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
