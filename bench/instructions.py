"""Instructions counted by valgrind's callgrind: a figure of CPU work that the machine's
noise hardly moves, for comparing two kinds of work where CPU time varies by ±10% from
round to round. (The same tick on the same rows counted within ±2% over four runs, one
of them beside a type check: its threads still interleave differently each time.)

A bench that offers it re-runs itself under callgrind (`rerun_under_callgrind`) with
counting off, and counts only the calls it wraps in `Counter.count`; valgrind runs the
process about fifty times slower, so use small sizes. Counts every thread of the process,
user space only (not the kernel, not the database server).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

_OUT_DIR = "BENCH_CALLGRIND_DIR"
T = TypeVar("T")


def rerun_under_callgrind() -> None:
    """Replace this process with itself under callgrind (no return), unless it already is
    that process. Exits with a clear message when valgrind is not installed."""
    if os.environ.get(_OUT_DIR):
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("--instructions needs valgrind (apt-get install valgrind)")
    out_dir = tempfile.mkdtemp(prefix="tw_callgrind_")
    os.environ[_OUT_DIR] = out_dir
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/callgrind.%p",
        sys.executable,
        *sys.argv,
    ]
    os.execvp(command[0], command)  # noqa: S606 - an argv list of our own


class Counter:
    """Counts the instructions of wrapped calls in a process that runs under callgrind."""

    def __init__(self) -> None:
        self.out_dir = Path(os.environ[_OUT_DIR])
        self.pid = str(os.getpid())

    def count(self, label: str, work: Callable[[], T]) -> tuple[T, int]:
        """(what `work()` returned, the instructions it took)."""
        self._control("--instr=on")
        self._control("--zero")
        try:
            result = work()
        finally:
            self._control(f"--dump={label}")
            self._control("--instr=off")
        return result, self._dumped(label)

    def _control(self, option: str) -> None:
        subprocess.run(["callgrind_control", option, self.pid], check=True, capture_output=True)

    def _dumped(self, label: str) -> int:
        trigger = f"desc: Trigger: dump {label}\n"
        for dump in self.out_dir.glob(f"callgrind.{self.pid}.*"):
            text = dump.read_text()
            if trigger in text:
                return int(text.split("\ntotals: ", 1)[1].split()[0])
        raise RuntimeError(f"no callgrind dump labelled {label} in {self.out_dir}")
