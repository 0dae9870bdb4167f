"""A small process supervisor for `manage.py demo`: run a few commands side by side, show
their output line by line behind a `name |` prefix, and stop them all together.

Each child runs in its own session. A terminal's Ctrl-C (SIGINT to the foreground process
group) therefore reaches only the launcher, which stops every child with exactly one
SIGTERM: the workers finish the row in flight and exit 0, the development server exits at
once, and no child is ever interrupted half-way through its start-up (where a SIGINT would
end in a KeyboardInterrupt traceback). SIGTERM or SIGHUP to the launcher do the same. A
second stop request kills the children at once. A child that exits on its own stops the
others, and the ending names it. The last line is always `<label> | stopped`.

On Linux each child also gets SIGTERM when the launcher dies without stopping them (even by
SIGKILL): its own session keeps terminal signals away, so only a parent-death signal can
stop it holding a port after its launcher is gone.

POSIX only (sessions, process groups).
"""

import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import IO, Protocol

from dbqueue.signals import stop_on_signals

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class TextSink(Protocol):
    """Where output lines go: a text file, or a management command's stdout."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...


def _show_every_line(line: str) -> bool:
    return False


@dataclass(frozen=True)
class ProcessSpec:
    """A command to supervise. `hide(line)` drops output lines not worth showing."""

    name: str
    argv: Sequence[str]
    hide: Callable[[str], bool] = _show_every_line


@dataclass(frozen=True)
class Ending:
    """How a supervised run ended: `died` names the child that exited on its own, with its
    `returncode` (negative: killed by that signal); None when a stop was requested.
    `killed` names the children that did not stop within the grace period."""

    died: str | None = None
    returncode: int | None = None
    killed: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0 if self.died is None else 1


def describe_returncode(returncode: int) -> str:
    if returncode < 0:
        with suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
        return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class PortUnavailable(Exception):
    pass


def port_check(host: str, port: int) -> None:
    """Raise PortUnavailable unless a server could listen on host:port now.

    SO_REUSEADDR like the development server, so a port left in TIME_WAIT by the previous
    run counts as free while a port someone listens on does not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise PortUnavailable(f"port {port} on {host} is not available: {reason}") from None


def free_port(host: str) -> int:
    """A port on `host` that nobody listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@dataclass
class _Child:
    spec: ProcessSpec
    process: subprocess.Popen[bytes]
    reader: threading.Thread


class Supervisor:
    """Runs `specs` until a stop is requested (`stop()`, or SIGINT/SIGTERM/SIGHUP when run
    in the main thread) or one of them exits; then stops the rest: SIGTERM to each child's
    process group, up to `grace` seconds for them to exit, SIGKILL for the others.
    Output lines go to `out` as `<name> | <line>`; the supervisor's own under `label`."""

    def __init__(
        self,
        specs: Sequence[ProcessSpec],
        *,
        out: TextSink,
        env: Mapping[str, str] | None = None,
        label: str = "supervisor",
        grace: float = 15.0,
        poll: float = 0.2,
    ) -> None:
        self.specs = specs
        self.out = out
        self.env = env
        self.label = label
        self.grace = grace
        self.poll = poll
        self._width = max(len(name) for name in [label, *(spec.name for spec in specs)])
        self._out_lock = threading.Lock()
        self._children: list[_Child] = []
        self._stop_requests = 0

    def stop(self) -> None:
        """Request a stop; a further request while stopping kills the children at once.
        Safe to call from another thread."""
        self._stop_requests += 1

    def run(self) -> Ending:
        with stop_on_signals(self.stop, signals=STOP_SIGNALS):
            died: tuple[str, int] | None = None
            try:
                self._start_all()
                died = self._watch()
            finally:
                killed = self._stop_all(requests_seen=self._stop_requests)
                for child in self._children:
                    child.reader.join(timeout=5)
        self._emit(self.label, "stopped")
        if died is None:
            return Ending(killed=killed)
        return Ending(died=died[0], returncode=died[1], killed=killed)

    def _start_all(self) -> None:
        die_with_us = _parent_death_signal(signal.SIGTERM)
        for spec in self.specs:
            if self._stop_requests:
                return
            process = subprocess.Popen(  # noqa: S603 - argv lists built by our own code
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=None if self.env is None else dict(self.env),
                start_new_session=True,
                preexec_fn=die_with_us,
            )
            assert process.stdout is not None
            reader = threading.Thread(
                target=self._pump,
                args=(spec, process.stdout),
                name=f"output of {spec.name}",
                daemon=True,
            )
            reader.start()
            self._children.append(_Child(spec=spec, process=process, reader=reader))
        if self._children:
            started = ", ".join(f"{c.spec.name} (pid {c.process.pid})" for c in self._children)
            self._emit(self.label, f"started {started}; Ctrl-C stops them all")

    def _watch(self) -> tuple[str, int] | None:
        """The first child to exit, or None once a stop is requested."""
        while not self._stop_requests:
            for child in self._children:
                returncode = child.process.poll()
                if returncode is not None:
                    message = f"{child.spec.name} exited unexpectedly"
                    self._emit(self.label, f"{message} ({describe_returncode(returncode)})")
                    return child.spec.name, returncode
            time.sleep(self.poll)
        return None

    def _stop_all(self, *, requests_seen: int) -> tuple[str, ...]:
        running = [child for child in self._children if child.process.poll() is None]
        if running:
            self._emit(self.label, "stopping " + ", ".join(c.spec.name for c in running))
        for child in running:
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while (
            any(child.process.poll() is None for child in running)
            and time.monotonic() < deadline
            and self._stop_requests <= requests_seen
        ):
            time.sleep(min(self.poll, 0.05))
        killed = tuple(child.spec.name for child in running if child.process.poll() is None)
        for child in running:
            if child.process.poll() is None:
                _signal_group(child.process, signal.SIGKILL)
        for child in self._children:
            child.process.wait()
        if killed:
            self._emit(self.label, f"killed {', '.join(killed)}: still running at the deadline")
        return killed

    def _pump(self, spec: ProcessSpec, stream: IO[bytes]) -> None:
        with stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not spec.hide(line):
                    self._emit(spec.name, line)

    def _emit(self, name: str, line: str) -> None:
        # A closed or broken terminal must not stop the output pumps: a child whose pipe is
        # never read would block on its next write.
        with self._out_lock, suppress(OSError, ValueError):
            self.out.write(f"{name:<{self._width}} | {line}\n")
            self.out.flush()


def _parent_death_signal(signum: int) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child receive `signum` when this process dies; None
    where the kernel has no such thing (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    # Resolved here, in the parent: the child between fork and exec must not load anything.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signum)

    return die_with_parent


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the child's whole process group (it leads its own session), so anything it
    started goes too. An exited child is not an error."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
