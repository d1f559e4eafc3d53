"""The request timeline page: lanes, the sample drawn when requests are many,
the colours, escaping; in Chromium, a real run's bars and their hover text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser
from loadruns import slogate, summary

from slogate.analysis.rundata import RunData
from slogate.analysis.timelines import COLUMNS, FLAGS, UNKNOWN, Timelines
from slogate.reports.request_timeline import itl_class, lanes, sample, script_json, timeline_html


def test_each_request_takes_the_lowest_lane_free_when_it_was_sent() -> None:
    # 0-2 and 1-3 overlap; 2-4 reuses lane 0 (free at 2); 3.5-5 lane 1 (free at 3);
    # 3.6-4.5 finds both busy and opens lane 2; 6-7 finds all free: lane 0
    spans = [(0, 2), (1, 3), (2, 4), (3.5, 5), (3.6, 4.5), (6, 7)]
    assert lanes(spans) == [0, 1, 0, 1, 2, 0]


def test_every_request_is_drawn_when_they_fit() -> None:
    drawn = sample([3.0, 1.0, 2.0], [10.0, 20.0, 30.0], limit=3, slowest=1)
    assert (drawn.rows, drawn.total, drawn.every, drawn.slowest) == ([1, 2, 0], 3, 1, 0)


def test_a_sample_keeps_every_kth_by_send_time_and_the_slowest() -> None:
    starts = [float(i) for i in range(10)]
    e2e = [1.0] * 10
    e2e[7] = 99.0  # not a multiple of 3 in send order: kept as one of the slowest
    drawn = sample(starts, e2e, limit=5, slowest=1)
    # every ceil(10 / (5 - 1)) = 3rd: rows 0, 3, 6, 9; and row 7, the slowest
    assert (drawn.rows, drawn.total, drawn.every, drawn.slowest) == ([0, 3, 6, 7, 9], 10, 3, 1)


@pytest.mark.parametrize(
    ("tpot", "limit", "kind"),
    [(10.0, 50.0, "fast"), (25.0, 50.0, "near"), (49.9, 50.0, "near"), (50.0, 50.0, "over"),
     (UNKNOWN, 50.0, "unknown"), (10.0, None, "unknown")],
)  # fmt: skip
def test_a_bar_is_coloured_by_its_mean_itl_against_the_limit(
    tpot: float, limit: float | None, kind: str
) -> None:
    assert itl_class(tpot, limit) == kind


def test_json_in_the_page_cannot_close_its_script_element() -> None:
    text = script_json(["</script><script>alert(1)</script>", "<!--", "a&b"])
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == ["</script><script>alert(1)</script>", "<!--", "a&b"]


def timelines(rows: list[dict], scenario: str = "chat") -> Timelines:
    t = Timelines(scenarios=[scenario])
    for row in rows:
        t.scenario.append(0)
        for name in COLUMNS:
            t.columns[name].append(float(row.get(name, 0.0)))
        for name in FLAGS:
            t.flags[name].append(row.get(name, name == "ok"))
    return t


def test_the_page_escapes_a_hostile_scenario_name_and_says_what_it_drew() -> None:
    hostile = '<img src=x onerror=alert(1)>"</script>'
    rows = [
        {"start_s": 100.0 + i, "ttft_ms": 200.0, "e2e_ms": 1500.0, "tpot_ms": 20.0,
         "output_tokens": 65.0, "input_tokens": 300.0}
        for i in range(5)
    ]  # fmt: skip
    page = timeline_html(timelines(rows, hostile), {"run_id": "r1"}, {}, "pass")
    assert hostile not in page and "<img" not in page
    assert page.count('class="req') == 5
    assert "all 5 requests" in page
    # no declared ITL limit: twice the median TPOT, 40 ms; 20 ms is under half of it
    assert page.count('class="itl near"') == 5


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_a_small_run_draws_one_bar_per_request_and_hover_shows_its_numbers(
    tmp_path: Path,
) -> None:
    from slogate.engines.exact import ExactEngine

    out = tmp_path / "out"
    with ExactEngine({"ttft_ms": 80, "itl_ms": 15}) as engine:
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", engine.url,
                       "--duration", "3s", "--warmup", "1s", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = RunData.load(out).timelines
    assert recorded is not None and len(recorded) > 8
    measured = summary(out)["scenarios"]["exact-chat"]["requests"]["total"]
    assert 'href="timeline.html"' in (out / "report.html").read_text()
    with Browser(tmp_path / "profile") as browser:
        browser.open((out / "timeline.html").as_uri())
        bars = browser.evaluate("document.querySelectorAll('svg.timeline g.req').length")
        warm = browser.evaluate("document.querySelectorAll('svg.timeline g.req.warmup').length")
        assert bars == len(recorded)
        assert bars - warm == measured
        assert browser.evaluate("document.getElementById('tip').style.display") in ("", "none")
        x, y, index = browser.evaluate(
            "(() => { const g = document.querySelectorAll('g.req')[3];"
            " const r = g.querySelector('rect.itl').getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2, +g.dataset.i]; })()"
        )
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait_for(
            "document.getElementById('tip').style.display === 'block'"
            " && document.getElementById('tip').textContent"
        )
        numbers = browser.evaluate("JSON.parse(document.getElementById('requests').textContent)")
        row = numbers[index]
        assert f"TTFT {row[2]:,} ms" in tip.replace(",", ",")
        assert re.search(r"sent at \d+\.\d{3} s", tip)
        assert f"output {int(row[7])} tokens" in tip
        assert browser.errors == []


def test_each_drawn_request_shows_its_own_long_gaps() -> None:
    rows = [
        {"start_s": 10.0 + i, "ttft_ms": 100.0, "e2e_ms": 900.0, "tpot_ms": 10.0} for i in range(3)
    ]
    t = timelines(rows)
    for row, end_ms, gap_ms in ((0, 300.0, 80.0), (0, 600.0, 90.0), (2, 500.0, 120.0)):
        t.gap_row.append(row)
        t.gap_end_ms.append(end_ms)
        t.gap_ms.append(gap_ms)
    page = timeline_html(t, {}, {}, "pass")
    bars = page.split('<g class="req')[1:]
    assert [bar.count('class="stall"') for bar in bars] == [2, 0, 1]
    numbers = json.loads(page.split('id="requests">')[1].split("</script>")[0])
    assert [(r[12], r[13]) for r in numbers] == [(2, 90.0), (0, None), (1, 120.0)]
