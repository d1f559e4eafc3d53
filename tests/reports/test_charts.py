"""The chart module and the percentile curves, on known inputs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from slogate.analysis.documents.contracts import SloEntry
from slogate.analysis.measurement.histograms import HistogramSet
from slogate.reports.charts import counter_rate, server_charts, threshold_rules
from slogate.reports.curves import nines, percentile_curve
from slogate.reports.svg import Axis, Band, Marker, Rule, Series, line_chart, log_ticks, thin


def parse(svg: str) -> ET.Element:
    """Charts must be well-formed XML (inline SVG in HTML tolerates less than it seems)."""
    return ET.fromstring(svg)


def test_nines_axis_positions() -> None:
    assert nines(90.0) == pytest.approx(1.0)
    assert nines(99.0) == pytest.approx(2.0)
    assert nines(99.9) == pytest.approx(3.0)


def test_percentile_curve_matches_the_histogram_and_ends_at_the_max() -> None:
    histograms = HistogramSet()
    for value in np.random.default_rng(3).exponential(50_000, 5000):
        histograms.record_us("x", int(value))
    h = histograms.histogram("x")
    curve = percentile_curve(h)
    assert curve[-1] == (pytest.approx(math.log10(5000)), h.get_max_value() / 1000)
    for x, value in curve[1:-1:7]:
        expected = h.get_value_at_percentile(100.0 * (1.0 - 10.0**-x)) / 1000
        assert value == pytest.approx(expected)
    assert [v for _, v in curve] == sorted(v for _, v in curve)
    assert percentile_curve(HistogramSet().histogram("empty")) == []


def test_thinning_keeps_the_spike() -> None:
    points = [(float(i), 1.0) for i in range(10_000)]
    points[7777] = (7777.0, 500.0)
    thinned = thin(points, 200)
    assert len(thinned) <= 220
    assert (7777.0, 500.0) in thinned


def test_log_ticks_cover_the_data() -> None:
    lo, hi, ticks = log_ticks(math.log10(45), math.log10(1958))
    assert 10**lo <= 45 and 10**hi >= 1958
    assert [round(10**t) for t in ticks] == [20, 50, 100, 200, 500, 1000, 2000]


def test_chart_escapes_names_and_draws_rules() -> None:
    svg = line_chart(
        [Series('<b>"x"</b>', [(0.0, 1.0), (1.0, None), (2.0, 3.0), (3.0, 4.0)])],
        title="t & <u>",
        y=Axis(log=True),
        rules=[Rule(2.0, "p99 ≤ 2 ms", x=1.0)],
    )
    root = parse(svg)
    assert "<b>" not in svg and "&lt;b&gt;" in svg
    assert root.find("title").text == "t & <u>"
    paths = root.findall(".//path")
    circles = root.findall(".//circle")
    assert len(paths) == 1  # the gap splits the line: a lone dot, then a segment
    assert len(circles) == 2  # that dot and the rule's mark
    assert any(t.text == "p99 ≤ 2 ms" for t in root.iter("text"))


def test_empty_chart_says_so() -> None:
    svg = line_chart([Series("a", [])], title="nothing")
    assert "no data" in svg
    parse(svg)


def test_bands_and_markers_are_drawn_escaped_and_linked() -> None:
    hostile = '<b>"x"</b>'
    svg = line_chart(
        [Series("p99", [(1.0, 10.0), (2.0, 12.0), (3.0, None), (4.0, 11.0)])],
        title="t",
        bands=[
            Band(
                hostile, [(1.0, 9.0, 11.0), (2.0, 11.0, 40.0), (3.0, None, None), (4.0, 10.0, 12.0)]
            )
        ],
        markers=[
            Marker(2.0, 12.0, "regression", hostile, href='run "2"/report.html'),
            Marker(1.0, 10.0, "pass", "night 1"),
        ],
    )
    root = parse(svg)
    paths = [p for p in root.iter("path") if p.get("class") == "band"]
    assert len(paths) == 1  # the stretch before the gap; the lone last point is a line
    assert [line for line in root.iter("line") if line.get("class") == "bandline"]
    links = list(root.iter("a"))
    assert [a.get("href") for a in links] == ['run "2"/report.html']
    assert links[0].find("path/title").text == hostile
    assert "<b>" not in svg
    ticks = [float(t.text) for t in root.iter("text") if t.get("class") == "yl"]
    assert max(ticks) >= 40.0 and min(ticks) == 0.0  # the band fits; the axis starts at zero


def test_threshold_rules_sit_at_their_percentile() -> None:
    slos = [
        SloEntry(
            name=f"{metric} {stat}",
            metric=metric,
            stat=stat,
            kind="max",
            threshold=threshold,
            value=None,
            verdict="inconclusive",
        )
        for metric, stat, threshold in (
            ("ttft_ms", "p99", 2000.0),
            ("ttft_ms", "max", 5000.0),
            ("itl_ms", "p95", 60.0),
        )
    ]
    rules = threshold_rules(slos, "ttft", top=4.0)
    assert [(r.y, r.x) for r in rules] == [(2000.0, pytest.approx(2.0)), (5000.0, 4.0)]


def test_counters_are_charted_as_rates_with_gaps_at_resets() -> None:
    assert counter_rate([(0.0, 0.0), (5.0, 50.0), (10.0, 20.0), (15.0, 70.0)]) == [
        (5.0, 10.0),
        (10.0, None),
        (15.0, 10.0),
    ]
    charts = server_charts(
        [
            {
                "t_s": 0.0,
                "source": "engine",
                "series": {"running": 1, "generation_tokens_total": 0},
            },
            {
                "t_s": 5.0,
                "source": "engine",
                "series": {"running": 2, "generation_tokens_total": 50},
            },
        ]
    )
    assert len(charts) == 2
    assert "generation_tokens_total per second" in charts[0]
