"""The inline SVG chart: one stacked bar per label, exact counts in the segment titles."""

import xml.etree.ElementTree as ET
from itertools import pairwise

from delivery.models import DeliveryOutcome
from operations.charts import RIGHT, WIDTH, Series, legend_positions, lines_svg, stacked_bars_svg

SVG = "{http://www.w3.org/2000/svg}"
SERIES = [Series("ok", "Delivered", "#0a0"), Series("bad", "Failed <5xx>", "#a00")]


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - our own output, not untrusted input


def _segments(root: ET.Element) -> list[ET.Element]:
    """The bars' rectangles (the legend's swatches have no title)."""
    return [rect for rect in root.iter(f"{SVG}rect") if rect.find(f"{SVG}title") is not None]


def _chart(values):
    return stacked_bars_svg(
        labels=[f"{hour:02d}:00" for hour in range(len(values))],
        values=values,
        series=SERIES,
        title="Deliveries & more",
    )


def test_segments_stack_in_series_order_with_their_counts():
    root = _parse(_chart([{"ok": 3, "bad": 1}, {}, {"bad": 4}]))

    segments = [rect.find(f"{SVG}title").text for rect in _segments(root)]

    assert segments == [
        "00:00 Delivered: 3",
        "00:00 Failed <5xx>: 1",
        "02:00 Failed <5xx>: 4",
    ]


def test_the_tallest_stack_fills_the_plot_and_the_axis_tops_at_its_total():
    root = _parse(_chart([{"ok": 3, "bad": 1}, {"ok": 1}]))

    bars = _segments(root)
    first_stack = sum(float(rect.get("height")) for rect in bars[:2])
    axis_labels = [text.text for text in root.iter(f"{SVG}text")]

    assert round(first_stack, 1) == 160.0
    assert {"0", "2", "4"} <= set(axis_labels)


def test_an_empty_window_draws_an_axis_and_no_bars():
    svg = _chart([{}] * 24)
    root = _parse(svg)

    assert _segments(root) == []
    assert 'aria-label="Deliveries &amp; more"' in svg


def test_lines_connect_the_points_and_skip_hours_without_a_value():
    svg = lines_svg(
        labels=["00:00", "01:00", "02:00"],
        values=[{"p50": 1.0, "p99": 60.0}, {"p50": None, "p99": None}, {"p50": 5.0, "p99": 30.0}],
        series=[Series("p50", "p50 (s)", "#111"), Series("p99", "p99 (s)", "#222")],
        title="Lateness",
    )

    assert svg.count("<polyline") == 2
    assert svg.count("<circle") == 4
    assert "00:00 p99 (s): 60</title>" in svg
    assert ">60</text>" in svg  # the axis tops at the largest value


def test_the_legend_of_every_delivery_outcome_fits_without_overlapping():
    series = [Series(o.value, o.label, "#000") for o in DeliveryOutcome]

    positions = legend_positions(series)

    for (x, width), (next_x, _) in pairwise(positions):
        assert x + width < next_x
    last_x, last_width = positions[-1]
    assert last_x + last_width <= WIDTH - RIGHT
