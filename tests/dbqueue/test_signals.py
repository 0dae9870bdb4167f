"""stop_on_signals: SIGTERM and SIGINT call stop() from another thread, then the previous
handlers return."""

import os
import signal
import threading

from dbqueue.signals import stop_on_signals


def test_each_stop_signal_calls_stop_outside_the_main_thread_and_handlers_return():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in (signal.SIGTERM, signal.SIGINT):
        called_from: list[threading.Thread] = []
        stopped = threading.Event()

        def stop(called_from=called_from, stopped=stopped):
            called_from.append(threading.current_thread())
            stopped.set()

        with stop_on_signals(stop):
            os.kill(os.getpid(), sig)
            assert stopped.wait(10)

        assert called_from and called_from[0] is not threading.main_thread()
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_signal_landing_while_the_main_thread_waits_on_the_event_still_stops_it():
    stop = threading.Event()
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))

    with stop_on_signals(stop.set):
        timer.start()
        assert stop.wait(10)
    timer.join()
