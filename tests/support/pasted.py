"""Shell blocks of the documentation pasted into bash against a running `manage.py demo`, as
a reader would: the demo's variable lines first, each `<thing id>` filled in from an earlier
answer, the status each call answers checked against the one its comment names.

A block is pasted when an HTML comment `<!-- runs-against-demo -->` precedes its ```sh
fence. Each call's status is the number that opens its comment (the trailing one, or the
first comment line after it): `# 201, secret shown once`, `# 202 {"id": …}`. A comment
saying `poll until "status": "completed"` repeats the call until a field of that name in the
answer holds that value, within a bounded wait.
"""

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import ROOT

MARKER = "<!-- runs-against-demo -->"
_MARKED_BLOCK = re.compile(rf"^{re.escape(MARKER)}\n```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_TRAILING_COMMENT = re.compile(r"\s#\s+(.*)$")
_STATUS = re.compile(r"^([1-5]\d\d)\b")
_POLL = re.compile(r'poll until "(\w+)": "([^"]+)"')
_PLACEHOLDER = re.compile(r"<([a-z]+) id>")
_PATH = re.compile(r'"\$API(/v1/[^"?]*)')
# Appends the HTTP status to each answer, on a line of its own: the reader's curl prints
# the body only, the check needs both.
_CURL_WITH_STATUS = "curl() { command curl -w '\\n%{http_code}' \"$@\"; }\n"


def shell_commands(block: str) -> list[str]:
    """The commands of a pasted block: comment and blank lines dropped, and the lines of
    one command (a trailing backslash, or a single quote still open) joined."""
    return [call.command for call in _commands_with_comments(block)]


@dataclass
class _Pasted:
    command: str
    comments: list[str]


def _commands_with_comments(block: str) -> list[_Pasted]:
    pasted: list[_Pasted] = []
    current = ""
    for line in block.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            if pasted and line.strip():
                pasted[-1].comments.append(line.strip().lstrip("#").strip())
            continue
        current += line + "\n"
        if not line.endswith("\\") and current.count("'") % 2 == 0:
            trailing = _TRAILING_COMMENT.search(line)
            pasted.append(_Pasted(current, [trailing[1]] if trailing else []))
            current = ""
    assert current == "", f"an unfinished command: {current}"
    return pasted


@dataclass(frozen=True)
class Call:
    """One pasted command, the status its comment names, and what it polls for."""

    command: str
    status: int
    poll: tuple[str, str] | None

    @property
    def path(self) -> str:
        found = _PATH.search(self.command)
        assert found, f"no $API path in {self.command}"
        return found[1]

    @property
    def creates(self) -> bool:
        return "-X POST" in self.command


def documented_calls(block: str) -> list[Call]:
    """The block's calls, each with the status its comment names (one without fails)."""
    calls = []
    for pasted in _commands_with_comments(block):
        statuses = [found[1] for text in pasted.comments if (found := _STATUS.match(text))]
        assert statuses, f"no status in the comment of {pasted.command}"
        poll = next(
            ((found[1], found[2]) for text in pasted.comments if (found := _POLL.search(text))),
            None,
        )
        calls.append(Call(pasted.command, int(statuses[0]), poll))
    return calls


def marked_blocks(*paths: Path) -> list[str]:
    """The ```sh blocks of `paths` (default: the README) marked to run against the demo."""
    return [
        block
        for path in paths or (ROOT / "README.md",)
        for block in _MARKED_BLOCK.findall(path.read_text())
    ]


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


def _holds(answer: Any, field: str, value: str) -> bool:
    """Whether some object in `answer`, at any depth, has `field` equal to `value`."""
    if isinstance(answer, dict):
        return answer.get(field) == value or any(_holds(v, field, value) for v in answer.values())
    if isinstance(answer, list):
        return any(_holds(item, field, value) for item in answer)
    return False


class DemoShell:
    """Runs calls in bash after the demo's variable lines, remembering each answer to fill
    the `<thing id>` of later calls as a reader would: the id of the newest object created
    on a route naming the thing, or of the newest answer's `thing` member."""

    def __init__(self, assignments: list[str], *, wait: float) -> None:
        self.preamble = "set -eu\n" + "".join(assignments) + _CURL_WITH_STATUS
        self.wait = wait
        self.answered: list[tuple[Call, Any]] = []

    def run(self, call: Call) -> Answer:
        deadline = time.monotonic() + self.wait
        while True:
            answer = self._run_once(call)
            if call.poll is None or _holds(answer.body, *call.poll):
                break
            assert time.monotonic() < deadline, (call.command, answer)
            time.sleep(0.2)
        self.answered.append((call, answer.body))
        return answer

    def _run_once(self, call: Call) -> Answer:
        filled = _PLACEHOLDER.sub(lambda found: self._id_of(found[1]), call.command)
        result = subprocess.run(
            ["bash", "-c", self.preamble + filled],
            capture_output=True,
            text=True,
            timeout=self.wait,
        )
        assert result.returncode == 0, (filled, result.stderr)
        body, _, status = result.stdout.rpartition("\n")
        answer = Answer(int(status), json.loads(body) if body.strip() else None)
        assert answer.status == call.status, (filled, answer)
        return answer

    def _id_of(self, thing: str) -> str:
        for call, body in reversed(self.answered):
            if not isinstance(body, dict):
                continue
            if isinstance(body.get(thing), dict) and "id" in body[thing]:
                return str(body[thing]["id"])
            if call.creates and thing in call.path.rsplit("/", 1)[-1] and "id" in body:
                return str(body["id"])
        raise AssertionError(f"no earlier answer names a {thing} id")
