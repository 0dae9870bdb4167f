"""Fault tests start real worker processes; whatever a test leaves running is killed, and
each test reports its figures on one line (`fault <name> key=value …`, shown with -s)."""

from collections.abc import Callable, Iterator

import pytest

from tests.faults.workers import Worker


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*args: str, app: str, env: dict[str, str] | None = None) -> Worker:
        worker = Worker(*args, app=app, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def report(record_property) -> Callable[..., None]:
    def emit(name: str, **figures: object) -> None:
        values = " ".join(
            f"{key}={value:.2f}" if isinstance(value, float) else f"{key}={value}"
            for key, value in figures.items()
        )
        print(f"\nfault {name} {values}")
        for key, value in figures.items():
            record_property(f"{name}.{key}", value)

    return emit
