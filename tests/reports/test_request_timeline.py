"""The request timeline page: lanes, the sample drawn when requests are many,
the colours, escaping; in Chromium, a real run's bars and their hover text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser
from loadruns import requests_by_sender, scenario_file, slogate, summary
from timeline_page import hover_bar

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.records import USER, sender
from slogate.analysis.measurement.timelines import COLUMNS, FLAGS, UNKNOWN, Timelines
from slogate.reports.request_timeline import (
    itl_class,
    lanes,
    sample,
    script_json,
    sender_lanes,
    timeline_html,
)


def test_a_senders_overlapping_requests_take_the_lowest_lane_free_when_sent() -> None:
    # 0-2 and 1-3 overlap; 2-4 reuses lane 0 (free at 2); 3.5-5 lane 1 (free at 3);
    # 3.6-4.5 finds both busy and opens lane 2; 6-7 finds all free: lane 0
    spans = [(0, 2), (1, 3), (2, 4), (3.5, 5), (3.6, 4.5), (6, 7)]
    assert lanes(spans) == [0, 1, 0, 1, 2, 0]


def test_each_sender_has_lanes_of_its_own_in_the_order_of_its_first_send() -> None:
    # 7 sends first, then 3 twice in a row, then a subagent of 7 overlaps 7's second request
    senders = [7, 3, 7, 3, 7]
    spans = [(0, 1), (0.5, 2), (1, 5), (2, 3), (2.5, 4)]
    lane_of, bands = sender_lanes(senders, spans)
    assert [(b.sender, b.top, b.lanes) for b in bands] == [(7, 0, 2), (3, 2, 1)]
    # 7: lanes 0 and 1 (its third request overlapped its second); 3: lane 2 for both
    assert lane_of == [0, 2, 0, 2, 1]


def test_every_request_of_every_sender_is_drawn_when_they_fit() -> None:
    drawn = sample([3.0, 1.0, 2.0], [10.0, 20.0, 30.0], [1, 0, 1], bars=3, lanes=2)
    assert drawn.rows == [1, 2, 0]
    assert (drawn.total, drawn.senders, drawn.senders_total) == (3, 2, 2)
    assert (drawn.senders_every, drawn.senders_slowest, drawn.every, drawn.slowest) == (1, 0, 1, 0)


def test_past_the_lanes_senders_are_sampled_whole_with_those_of_the_slowest() -> None:
    # 6 senders, 2 requests each, sent in turn (0 1 .. 5 0 1 ..); 3's second is the slowest
    users = [i % 6 for i in range(12)]
    starts = [float(i) for i in range(12)]
    e2e = [1.0] * 12
    e2e[9] = 99.0
    drawn = sample(starts, e2e, users, bars=100, lanes=4, slowest=1)
    # every ceil(6 / (4 - 1)) = 2nd sender by first send: 0, 2, 4; and 3 for row 9
    assert sorted({users[r] for r in drawn.rows}) == [0, 2, 3, 4]
    assert drawn.rows == [0, 2, 3, 4, 6, 8, 9, 10]  # each kept sender's every request
    assert (drawn.senders, drawn.senders_total, drawn.senders_every) == (4, 6, 2)
    assert (drawn.senders_slowest, drawn.every, drawn.slowest) == (1, 1, 0)


def test_past_the_bars_each_senders_requests_are_thinned_keeping_the_slowest() -> None:
    # 2 senders, 6 requests each, alternating; row 5 (1's third) the slowest
    users = [0, 1] * 6
    starts = [float(i) for i in range(12)]
    e2e = [1.0] * 12
    e2e[5] = 99.0
    drawn = sample(starts, e2e, users, bars=5, lanes=10, slowest=1)
    # 12 requests: every ceil(12 / (5 - 1)) = 3rd of each sender's: 0's rows 0, 6; 1's 1, 7; and 5
    assert drawn.rows == [0, 1, 5, 6, 7]
    assert (drawn.senders, drawn.senders_every, drawn.every, drawn.slowest) == (2, 1, 3, 1)


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
        t.user.append(row.get("user", 0))
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
    assert "all 5 requests of 1 user." in page
    # no declared ITL limit: twice the median TPOT, 40 ms; 20 ms is under half of it
    assert page.count('class="itl near"') == 5


def test_a_cut_off_request_is_drawn_to_the_cut_outlined_as_cut_off_not_failed() -> None:
    rows = [
        {"start_s": 0.0, "ttft_ms": 200.0, "e2e_ms": 1500.0, "tpot_ms": 20.0},
        {"start_s": 1.0, "ttft_ms": 900.0, "e2e_ms": 3000.0, "tpot_ms": -1.0, "ok": False,
         "cut_off": True},
        {"start_s": 2.0, "ttft_ms": -1.0, "e2e_ms": 500.0, "tpot_ms": -1.0, "ok": False},
    ]  # fmt: skip
    page = timeline_html(timelines(rows), {"run_id": "r1"}, {}, "fail")
    kinds = re.findall(r'<g class="(req[^"]*)" data-i="(\d)"', page)
    assert sorted(kinds, key=lambda k: k[1]) == [("req", "0"), ("req cutoff", "1"),
                                                 ("req failed", "2")]  # fmt: skip
    numbers = json.loads(re.search(r'id="requests">(.*?)</script>', page).group(1))
    assert [n[15] for n in numbers] == [False, True, False]


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_a_small_run_draws_a_lane_per_user_with_its_requests_and_hover_shows_them(
    tmp_path: Path,
) -> None:
    from slogate.engines.exact import ExactEngine

    out = tmp_path / "out"
    scenario = scenario_file(tmp_path, "exact-chat", load={"users": 3, "spawn_rate": 3})
    with ExactEngine({"ttft_ms": 80, "itl_ms": 15}) as engine:
        done = slogate("run", str(scenario), "--host", engine.url,
                       "--duration", "3s", "--warmup", "1s", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = RunData.load(out).timelines
    assert recorded is not None and len(recorded) > 8
    per_user = requests_by_sender(out)["user"]
    assert sorted(per_user) == [(0, 0), (0, 1), (0, 2)]
    done_summary = summary(out)
    measured = done_summary["scenarios"]["exact-chat"]["requests"]["total"]
    assert 'href="timeline.html"' in (out / "report.html").read_text()
    with Browser(tmp_path / "profile") as browser:
        browser.open((out / "timeline.html").as_uri())
        bars = browser.evaluate("document.querySelectorAll('svg.timeline g.req').length")
        warm = browser.evaluate("document.querySelectorAll('svg.timeline g.req.warmup').length")
        cut = browser.evaluate("document.querySelectorAll('svg.timeline g.req.cutoff').length")
        assert bars == len(recorded)
        assert cut == done_summary["run"]["cancelled_at_stop"]  # the stop's, drawn to the cut
        assert bars - warm - cut == measured
        # each user's bars, by the lanes they are drawn in (their rendered height on the page)
        lanes = browser.evaluate(
            "[...document.querySelectorAll('svg.timeline g.sender')].map(s => [s.dataset.sender,"
            " [...new Set([...s.querySelectorAll('rect.wait')].map("
            "r => Math.round(r.getBoundingClientRect().y)))], s.querySelectorAll('g.req').length])"
        )
        assert {name: count for name, _, count in lanes} == {
            f"user {n}": count for (_, n), count in per_user.items()
        }
        assert [len(ys) for _, ys, _ in lanes] == [1, 1, 1]  # a user's requests never overlap
        assert len({ys[0] for _, ys, _ in lanes}) == 3  # and each user has its own lane
        assert browser.evaluate("document.getElementById('tip').style.display") in ("", "none")
        tip, row = hover_bar(browser, 3, "itl")
        assert f"TTFT {row[2]:,} ms" in tip.replace(",", ",")
        assert re.search(r"sent at \d+\.\d{3} s", tip)
        assert f"output {int(row[7])} tokens" in tip
        assert re.search(r"scenario exact-chat, user [0-2]\b", tip)
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


def test_each_sender_is_a_lane_named_by_its_process_when_there_are_several() -> None:
    users = [sender(USER, 0, 0), sender(USER, 1, 0), sender(USER, 0, 0), sender(USER, 1, 1)]
    rows = [
        {"start_s": 10.0 + i, "ttft_ms": 100.0, "e2e_ms": 900.0, "tpot_ms": 10.0, "user": user}
        for i, user in enumerate(users)
    ]
    page = timeline_html(timelines(rows), {}, {}, "pass")
    senders = re.findall(r'<g class="sender" data-sender="([^"]*)">(.*?)</g></g>', page)
    assert [name for name, _ in senders] == [
        "user 0 of load process 0", "user 0 of load process 1", "user 1 of load process 1"
    ]  # fmt: skip
    assert "all 4 requests of 3 users." in page and ">process\u00b7user</text>" in page
    numbers = json.loads(page.split('id="requests">')[1].split("</script>")[0])
    assert [r[14] for r in numbers] == [
        "user 0 of load process 0", "user 0 of load process 1",
        "user 0 of load process 0", "user 1 of load process 1",
    ]  # fmt: skip


def test_requests_saved_without_their_sender_share_one_sender_in_packed_lanes() -> None:
    rows = [
        {"start_s": start, "ttft_ms": 100.0, "e2e_ms": 1500.0, "tpot_ms": 10.0, "user": -1}
        for start in (10.0, 10.5, 13.0)
    ]
    page = timeline_html(timelines(rows), {}, {}, "pass")
    assert page.count('<g class="sender"') == 1
    assert 'data-sender="sender unknown (saved before senders were recorded)"' in page
    # the first two overlapped: two lanes; the third reuses the first
    ys = dict(re.findall(r'<g class="req[^"]*" data-i="(\d)"><rect x="[\d.]+" y="([\d.]+)"', page))
    assert ys["0"] == ys["2"] != ys["1"]
