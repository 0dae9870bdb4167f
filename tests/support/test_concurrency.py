"""The thread harness of the concurrency tests: results in order, every worker's failure
reaches the test, and a worker that never ends fails the test instead of hanging it."""

import threading

import pytest

from tests.support.concurrency import Threads, run_together


def test_the_workers_run_at_once_and_their_results_come_back_in_order():
    # Each worker waits for all the others: run one after another, they would never end.
    all_running = threading.Barrier(3)

    def worker(n: int) -> int:
        all_running.wait(timeout=10)
        return n

    assert run_together([lambda n=n: worker(n) for n in range(3)]) == [0, 1, 2]


def test_a_failing_worker_fails_the_test_after_the_others_end():
    ended: list[str] = []

    def fails() -> None:
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        run_together([fails, lambda: ended.append("other")])
    assert ended == ["other"]


def test_each_failing_worker_is_reported():
    def fails(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ExceptionGroup) as raised:
        run_together([lambda: fails("one"), lambda: fails("two")])
    assert [str(error) for error in raised.value.exceptions] == ["one", "two"]


def test_a_worker_still_running_at_the_deadline_is_a_timeout():
    release = threading.Event()
    threads = Threads([lambda: release.wait(timeout=10)]).start()

    with pytest.raises(TimeoutError, match="1 of 1 workers"):
        threads.join(timeout=0)
    release.set()
    assert threads.join() == [True]
