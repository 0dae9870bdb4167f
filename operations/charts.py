"""Server-rendered charts for the admin: inline SVG built from plain numbers, so the page
needs no JavaScript, no front-end build and no external asset. No Django imports."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 760
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 12, 48
LABEL_EVERY = 3


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    color: str


def stacked_bars_svg(
    *,
    labels: Sequence[str],
    values: Sequence[Mapping[str, int]],
    series: Sequence[Series],
    title: str,
) -> str:
    """An SVG of one stacked bar per label (bottom to top in `series` order), with a y axis
    from 0 to the largest stack, every LABEL_EVERY-th x label and a legend. Each segment
    carries a <title> with its exact count, so the numbers are readable on hover."""
    top = max([1, *(sum(column.get(s.key, 0) for s in series) for column in values)])
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / max(1, len(labels))
    parts = [*_svg_open(title), *_y_axis(top, plot_width, plot_height)]
    for index, (label, column) in enumerate(zip(labels, values, strict=True)):
        x = LEFT + index * slot
        parts.extend(_stack(x, slot, label, column, series, top, plot_height))
        if index % LABEL_EVERY == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{TOP + plot_height + 14}" '
                f'text-anchor="middle" fill="currentColor">{escape(label)}</text>'
            )
    parts.extend(_legend(series))
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
    ]


def _y_axis(top: int, plot_width: float, plot_height: float) -> list[str]:
    lines = []
    for value in sorted({0, top // 2, top}):
        y = TOP + plot_height - value / top * plot_height
        lines.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_width}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#ccc" stroke-width="1"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="currentColor">{value}</text>'
        )
    return lines


def _stack(
    x: float,
    slot: float,
    label: str,
    column: Mapping[str, int],
    series: Sequence[Series],
    top: int,
    plot_height: float,
) -> list[str]:
    rects, base = [], TOP + plot_height
    for s in series:
        count = column.get(s.key, 0)
        if not count:
            continue
        height = count / top * plot_height
        base -= height
        rects.append(
            f'<rect x="{x + 1:.1f}" y="{base:.1f}" width="{max(1.0, slot - 2):.1f}" '
            f'height="{height:.1f}" fill="{s.color}">'
            f"<title>{escape(label)} {escape(s.label)}: {count}</title></rect>"
        )
    return rects


# A generous width of one character at font-size 11 (sans-serif), for laying out the legend.
CHAR_WIDTH = 6.5
SWATCH, GAP = 14, 18


def legend_positions(series: Sequence[Series]) -> list[tuple[float, float]]:
    """Each legend item's (x, width): side by side, each as wide as its label, so a long
    label ("Deferred (not attempted)") never runs into the next one."""
    positions, x = [], float(LEFT)
    for s in series:
        width = SWATCH + len(s.label) * CHAR_WIDTH
        positions.append((x, width))
        x += width + GAP
    return positions


def _legend(series: Sequence[Series]) -> list[str]:
    y = HEIGHT - 14
    items = []
    for s, (x, _) in zip(series, legend_positions(series), strict=True):
        items.append(
            f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{s.color}"/>'
            f'<text x="{x + SWATCH:.1f}" y="{y}" fill="currentColor">{escape(s.label)}</text>'
        )
    return items


def lines_svg(
    *,
    labels: Sequence[str],
    values: Sequence[Mapping[str, float | None]],
    series: Sequence[Series],
    title: str,
) -> str:
    """An SVG of one line per series over `labels` (a missing value breaks the line), with
    a y axis from 0 to the largest value and the same legend as the bars. Each point
    carries a <title> with its value, readable on hover."""
    top = max([1.0, *(v for column in values for v in column.values() if v is not None)])
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / max(1, len(labels))
    parts = [*_svg_open(title), *_y_axis(round(top), plot_width, plot_height)]
    for index, label in enumerate(labels):
        if index % LABEL_EVERY == 0:
            x = LEFT + index * slot + slot / 2
            parts.append(
                f'<text x="{x:.1f}" y="{TOP + plot_height + 14}" '
                f'text-anchor="middle" fill="currentColor">{escape(label)}</text>'
            )
    for s in series:
        parts.extend(_line(s, labels, values, top, slot, plot_height))
    parts.extend(_legend(series))
    parts.append("</svg>")
    return "".join(parts)


def _line(
    s: Series,
    labels: Sequence[str],
    values: Sequence[Mapping[str, float | None]],
    top: float,
    slot: float,
    plot_height: float,
) -> list[str]:
    points, marks = [], []
    for index, (label, column) in enumerate(zip(labels, values, strict=True)):
        value = column.get(s.key)
        if value is None:
            continue
        x = LEFT + index * slot + slot / 2
        y = TOP + plot_height - value / top * plot_height
        points.append(f"{x:.1f},{y:.1f}")
        marks.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{s.color}">'
            f"<title>{escape(label)} {escape(s.label)}: {value:g}</title></circle>"
        )
    line = (
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{s.color}" stroke-width="1.5"/>'
    )
    return [line, *marks] if points else []
