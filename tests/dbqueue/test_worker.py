"""The shared worker loop: passes `interval` apart, at once after a pass that left work."""

import threading
from dataclasses import dataclass

from dbqueue.worker import Worker


@dataclass
class Pass:
    claimed: int = 1
    duration: float = 0.0
    left: int = 0

    def line(self) -> str:
        return f"event=test claimed={self.claimed} left={self.left}"


def test_a_pass_that_left_work_is_followed_at_once_and_idle_ones_wait():
    passes = [Pass(left=5), Pass(left=2), Pass(left=0)]
    ran: list[Pass] = []
    lines: list[str] = []

    def run(stop: threading.Event) -> Pass:
        ran.append(passes[len(ran)])
        if len(ran) == len(passes):
            stop.set()
        return ran[-1]

    worker = Worker(
        "test",
        run,
        interval=3600,
        report=lines.append,
        report_error=lines.append,
        again=lambda summary: summary.left > 0,
    )
    thread = threading.Thread(target=worker.run_loop, daemon=True)
    thread.start()
    thread.join(30)

    # Three passes without ever waiting out the hour; the last one was told to stop.
    assert not thread.is_alive()
    assert ran == passes
    assert worker.timed_wakeups == 0
    assert lines == [p.line() for p in passes]
