"""Reading PostgreSQL's EXPLAIN (FORMAT JSON) output in tests."""

from typing import Any


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan node and every node under it."""
    nodes = [plan]
    for child in plan.get("Plans", ()):
        nodes += plan_nodes(child)
    return nodes
