"""What one burst of the ticks scenario measured, and its report: deliveries/s per burst and
against one process, the cores each resource used, which was the limit and why, CPU per
delivered row, exactly-once checks."""

import argparse
import collections
import os
from dataclasses import dataclass, field

# Above this share of the machine's cores in use, the cores themselves are the limit.
MACHINE_SATURATED = 0.9
NEAR_CEILING = 0.8


@dataclass
class Burst:
    processes: int
    rows: int
    wall: float = 0.0
    completed: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    machine: float = 0.0
    received: collections.Counter = field(default_factory=collections.Counter)
    spread: float = 0.0  # first to last arrival at the receiver, seconds
    ticks: list[dict[str, str]] = field(default_factory=list)
    early: list[tuple[float, int, int]] = field(default_factory=list)  # (at s, process, due)
    stderr: list[str] = field(default_factory=list)


RESOURCES = {"database": "database CPU", "receiver": "receiver", "ticks": "tick CPU"}


def ceilings(result: Burst, cores: int) -> dict[str, int]:
    """The cores each resource could use at most: the database all of them; the receiver
    one (one Python process: its threads share one interpreter lock); the ticks one each."""
    return {"database": cores, "receiver": 1, "ticks": min(result.processes, cores)}


def cores_used(result: Burst) -> dict[str, float]:
    """Cores busy on average over the burst (CPU s / wall s): each resource, this bench's
    own process, and `other`: the rest of the machine (other work on a shared machine)."""
    used = {name: result.cpu.get(name, 0.0) / result.wall for name in (*RESOURCES, "bench")}
    used["machine"] = result.machine / result.wall
    used["other"] = used["machine"] - sum(used[name] for name in (*RESOURCES, "bench"))
    return used


def limit(result: Burst, cores: int) -> str:
    """Which resource was nearest saturation, with a one-line reason."""
    used = cores_used(result)
    shares = ", ".join(f"{label} {used[name]:.2f}" for name, label in RESOURCES.items())
    shares += f", this bench {used['bench']:.2f}, other load {used['other']:.2f}"
    if used["machine"] >= MACHINE_SATURATED * cores:
        biggest = max(RESOURCES, key=used.get)
        return (
            f"the machine's {cores} cores: {used['machine']:.2f} of {cores} busy ({shares}); "
            f"the three share them, {RESOURCES[biggest]} took most"
        )
    caps = ceilings(result, cores)
    nearest = max(RESOURCES, key=lambda name: used[name] / caps[name])
    share = used[nearest] / caps[nearest]
    if share >= NEAR_CEILING:
        return (
            f"{RESOURCES[nearest]}: {used[nearest]:.2f} of the {caps[nearest]} core(s) it can "
            f"use ({share:.0%}); machine {used['machine']:.2f} of {cores} busy ({shares})"
        )
    return (
        f"no CPU saturated (nearest: {RESOURCES[nearest]} at {share:.0%} of "
        f"{caps[nearest]} core(s); machine {used['machine']:.2f} of {cores}): the processes "
        "waited (claim and write-back round trips, row locks, idle intervals)"
    )


def print_bursts(bursts: list[Burst], args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    base = bursts[0].rows / bursts[0].wall
    print(
        f"\nticks: {bursts[0].rows:,} due webhook rows over {args.tenants} tenants (an "
        f"endpoint each), drained by N `run_tick --loop` processes; CPU as cores busy "
        f"(CPU s / wall s) of {cores}"
    )
    print(
        f"{'N':>2} {'wall s':>7} {'deliv/s':>8} {'x N=1':>6} {'steady/s':>9} "
        f"{'database':>9} {'receiver':>9} {'ticks':>6} {'bench':>6} {'other':>6} {'machine':>8}"
    )
    for result in bursts:
        rate = result.rows / result.wall
        used = cores_used(result)
        print(
            f"{result.processes:>2} {result.wall:>7.1f} {rate:>8.0f} {rate / base:>5.2f}x "
            f"{result.rows / max(result.spread, 1e-9):>9.0f} {used['database']:>9.2f} "
            f"{used['receiver']:>9.2f} {used['ticks']:>6.2f} {used['bench']:>6.2f} "
            f"{used['other']:>6.2f} {used['machine']:>8.2f}"
        )
    print("steady/s: rows over first to last arrival at the receiver (no start-up)")
    for result in bursts:
        print(f"N={result.processes} limit: {limit(result, cores)}")
    for result in bursts:
        print_cost(result, cores)
    for result in bursts:
        print_checks(result)


def print_cost(result: Burst, cores: int) -> None:
    """CPU per row: the figure other load on a shared machine moves least, and the rate the
    machine's cores would allow if the three had them to themselves."""
    per_row = {name: result.cpu.get(name, 0.0) * 1000 / result.rows for name in RESOURCES}
    total = sum(per_row.values())
    print(
        f"N={result.processes} CPU per row: "
        + ", ".join(f"{RESOURCES[name]} {ms:.2f} ms" for name, ms in per_row.items())
        + f"; together {total:.2f} ms, so {cores} cores to themselves would allow "
        f"about {cores * 1000 / total:.0f} rows/s"
    )


def print_checks(result: Burst) -> None:
    total = sum(result.received.values())
    duplicates = total - len(result.received)
    summed = {
        key: sum(int(tick.get(key, 0)) for tick in result.ticks)
        for key in ("claimed", "delivered", "released", "fenced_out", "errors")
    }
    print(
        f"N={result.processes}: receiver got {len(result.received):,} distinct webhook-ids of "
        f"{result.rows:,} ({duplicates} duplicates), {result.completed:,} rows completed; "
        f"{len(result.ticks)} ticks, " + " ".join(f"{k}={v}" for k, v in summed.items())
    )
    print(
        "  each tick (process: claimed/delivered/released, its duration, ended at, due_left): "
        + "; ".join(
            f"{tick['process']}: {tick['claimed']}/{tick['delivered']}/{tick['released']} "
            f"{float(tick['duration_s']):.1f} s, at {tick['ended_s']} s, {tick['due_left']}"
            for tick in result.ticks
        )
    )
    for at, index, left in result.early:
        print(
            f"  tick of process {index + 1} ended at {at:.1f} s reporting due_left=0 while "
            f"{left} rows were due and unclaimed"
        )
    for line in result.stderr[:5]:
        print(f"  stderr {line}")
    if len(result.stderr) > 5:
        print(f"  ... {len(result.stderr) - 5} more stderr lines")
