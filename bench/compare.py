"""Run one bench/load.py scenario on another commit and on this tree, alternately.

    .venv/bin/python bench/compare.py --commit 252630c [--scenario burst] [--rounds 2]
        [--db postgres|sqlite] [--trees DIR]

The commit gets a git worktree of its own (detached, under --trees, default the temporary
directory) with its own virtualenv, made on first use and kept for the next run. Each round
runs the scenario in the commit's tree, then in this one, each in its own process and, on
PostgreSQL, its own database (DATABASE_URL's name, default `speed_compare`, with `_base` or
`_head` appended; dropped and re-created by load.py). Prints every round's lines and the
drain times side by side; never judges.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PG_DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/speed_compare"
DRAINED = re.compile(r"drained in ([0-9.]+)s")


def commit_tree(commit: str, trees: Path) -> Path:
    """A worktree of `commit` with its virtualenv, made once."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = trees / f"tw_compare_{sha[:12]}"
    if not (tree / ".git").exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha], check=True
        )
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv")], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-e", ".[dev]"], cwd=tree, check=True
        )
    return tree


def run_scenario(tree: Path, *, scenario: str, db: str, database_url: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url}
    command = [str(tree / ".venv" / "bin" / "python"), "bench/load.py", "--scenario", scenario]
    done = subprocess.run(
        [*command, "--db", db], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _with_suffix(url: str, suffix: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path + suffix))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", required=True)
    parser.add_argument("--scenario", default="burst")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--trees", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    base = commit_tree(args.commit, args.trees)
    url = os.environ.get("DATABASE_URL", PG_DEFAULT_URL)
    sides = {"base": base, "head": ROOT}
    times: dict[str, list[float]] = {side: [] for side in sides}
    for round_ in range(1, args.rounds + 1):
        for side, tree in sides.items():
            out = run_scenario(
                tree, scenario=args.scenario, db=args.db, database_url=_with_suffix(url, f"_{side}")
            )
            for line in out.splitlines():
                print(f"round {round_} {side} ({tree.name}): {line}", flush=True)
            times[side] += [float(m) for m in DRAINED.findall(out)]
    for side in sides:
        print(f"{side}: drained in {', '.join(f'{t:.1f}s' for t in times[side])}")
    if times["base"] and times["head"]:
        ratio = min(times["head"]) / min(times["base"])
        print(f"head / base (best rounds): {ratio:.2f}")


if __name__ == "__main__":
    main()
