"""One-line `key=value` (logfmt) records for the workers' summary lines, so that log
shippers and `grep` alike can pick the numbers out without a custom parser."""

from collections.abc import Mapping


def logfmt_line(event: str, values: Mapping[str, object]) -> str:
    """`event=<event> k1=v1 k2=v2 …`; floats get three decimals. Values are our own counters
    and names, never client input, so they hold no spaces or quotes to escape."""
    parts = [f"event={event}"]
    for key, value in values.items():
        parts.append(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}")
    return " ".join(parts)
