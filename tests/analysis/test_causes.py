"""The timeline rules on hand-made requests whose numbers are checked by hand
(each expected value's arithmetic is in the comment beside it)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from slogate.analysis.diagnosis.causes import (
    Requests,
    Stalls,
    cache_effect,
    computed_tokens,
    concurrency_ceiling,
    find_stalls,
    interference,
    preemption,
    timeline_findings,
    ttft_findings,
)
from slogate.analysis.diagnosis.findings import Finding
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import SLOT, USER, RequestRecord, sender, sender_parts
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.analysis.measurement.timelines import (
    COLUMNS,
    FLAGS,
    MAX_REQUESTS,
    UNKNOWN,
    UNKNOWN_USER,
    Timelines,
    long_gaps,
)

MS = 1_000_000


def timelines(rows: list[dict], gaps: list[tuple[int, float, float]] = ()) -> Timelines:
    """Rows of start_s, ttft_ms, e2e_ms (tpot 10 ms, input 500, output 100,
    turn 0 unless given; ``cut_off``: a request the run's end cut off, not
    ok); gaps as (row, end ms after its start, gap ms)."""
    t = Timelines(scenarios=["chat"])
    defaults = {
        "tpot_ms": 10.0,
        "input_tokens": 500,
        "cached_tokens": -1,
        "output_tokens": 100,
        "conversation": 0,
        "queue_ms": -1,
        "prefill_ms": -1,
    }
    for row in rows:
        values = {**defaults, "turn": 0, **row}
        t.scenario.append(0)
        t.user.append(row.get("user", 0))
        for name in COLUMNS:
            t.columns[name].append(float(values[name]))
        t.flags["ok"].append(not row.get("cut_off", False))
        t.flags["warmup"].append(False)
        t.flags["cut_off"].append(row.get("cut_off", False))
    for row, end, gap in gaps:
        t.gap_row.append(row)
        t.gap_end_ms.append(end)
        t.gap_ms.append(gap)
    return t


# r0 stalls twice, each time until another request's first token (1.0 s: r1's,
# 2.0 s: r2's); r1 stalls until r2's first token; r2 stalls at 2.5 s, where no
# first token is.
INTERFERING = timelines(
    [
        {"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 3000, "input_tokens": 100},
        {"start_s": 0.7, "ttft_ms": 300, "e2e_ms": 2000, "input_tokens": 3000},
        {"start_s": 1.6, "ttft_ms": 400, "e2e_ms": 1000, "input_tokens": 4000},
    ],
    [(0, 1000, 300), (0, 2000, 400), (1, 1300, 400), (2, 900, 300)],
)


def interference_at_10_ms(r: Requests) -> tuple[Stalls, Finding]:
    """The stalls at a typical ITL of 10 ms, and the prefill interference they
    show against an ITL limit of 250 ms (claimed, or the test fails)."""
    stalls = find_stalls(r, itl_ms=10.0)
    found = interference(r, "chat", {"itl_ms": 250.0}, stalls)
    assert found is not None and found.cause == "prefill interference"
    return stalls, found


def test_stalls_ending_at_other_requests_first_tokens_are_prefill_interference():
    stalls, found = interference_at_10_ms(Requests.of(INTERFERING))
    # stall floor max(5 x 10, 5) = 50 ms: all four; tolerance max(2 x 10, 10) = 20 ms
    assert list(stalls.coinciding) == [True, True, True, False]
    assert list(stalls.coinciding_inputs) == [3000, 4000, 4000, 0]
    # 3 first tokens over the run's 3 s (0 to r0's end): 1/s; 1 - exp(-1 x 0.04)
    assert stalls.chance == pytest.approx(0.0392, abs=1e-4)
    e = found.evidence
    assert (e["stalls"], e["coinciding"], e["coinciding_share"]) == (4, 3, 0.75)
    # stalls 300, 400, 400 ms against 3k, 4k, 4k tokens: 100 ms per 1k exactly
    assert e["stall_ms_per_1k_input_tokens"] == 100.0
    assert e["stall_input_rank_correlation"] == 1.0
    assert (e["stall_ms_max"], e["stall_ms_median"]) == (400.0, 400.0)
    # of the 4 stalls over 250 ms, 3 coincide
    assert found.share == {"itl_ms": 0.75}
    assert "3 of 4 stalls" in found.text and "100 ms per 1k prompt tokens" in found.text


def test_stalls_no_first_token_explains_are_no_interference_claim():
    lonely = timelines(
        [{"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 3000}],
        [(0, 1000, 300), (0, 2000, 300), (0, 2500, 300)],
    )
    r = Requests.of(lonely)
    assert interference(r, "chat", {"itl_ms": 50.0}, find_stalls(r, 10.0)) is None


# r0 stalls three times: until r1's first token (1.2 s), at 2.5 s where no
# first token is, and until r2's first token (4.0 s); r1 stalls until r2's
# first token too. r2 was sent at 3.5 s and the run's end cut it off at 6.0 s,
# 2 s into its stream: no usage came, so its input is unknown.
BESIDE_A_CUT_OFF = [
    {"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 6000, "input_tokens": 100},
    {"start_s": 0.9, "ttft_ms": 300, "e2e_ms": 3500, "input_tokens": 3000},
    {"start_s": 3.5, "ttft_ms": 500, "e2e_ms": 2500, "input_tokens": -1, "tpot_ms": -1,
     "cut_off": True},
]  # fmt: skip
STALLS_BESIDE_A_CUT_OFF = [(0, 1200, 300), (0, 2500, 300), (0, 4000, 450), (1, 3100, 450)]


def test_a_stall_at_a_cut_off_requests_first_token_counts_as_interference():
    r = Requests.of(timelines(BESIDE_A_CUT_OFF, STALLS_BESIDE_A_CUT_OFF))
    assert list(r.rows("chat")) == [True, True, False]  # never timed
    stalls, found = interference_at_10_ms(r)
    # tolerance max(2 x 10, 10) = 20 ms: r1's first token at 0.9 + 0.3 = 1.2 s,
    # r2's at 3.5 + 0.5 = 4.0 s (r0's stall at 4.0 s, r1's at 0.9 + 3.1 s)
    assert list(stalls.coinciding) == [True, False, True, True]
    assert list(stalls.with_cut_off) == [False, False, True, True]
    # r2's input is unknown: the stalls it ends have no known prompt size
    assert stalls.coinciding_inputs[:2].tolist() == [3000, 0]
    assert np.isnan(stalls.coinciding_inputs[2:]).all()
    # 3 first tokens over 0..6 s (r0's end and r2's cut): 0.5/s; 1 - exp(-0.5 x 0.04)
    assert stalls.chance == pytest.approx(0.0198, abs=1e-4)
    e = found.evidence
    assert (e["stalls"], e["coinciding"], e["coinciding_share"]) == (4, 3, 0.75)
    assert e["coinciding_with_cut_off"] == 2
    # three stalls with a known size: 3k tokens only once, too few to fit
    assert "stall_ms_per_1k_input_tokens" not in e
    assert (e["stall_ms_max"], e["stall_ms_median"]) == (450.0, 450.0)
    assert found.share == {"itl_ms": 0.75}  # 3 of the 4 stalls over 250 ms
    assert "3 of 4 stalls" in found.text
    assert "(75%, where chance gives 2%; 2 of them at a request the run's end then cut off)" in (
        found.text
    )


def test_without_the_cut_off_requests_row_its_prefill_is_no_explanation():
    """The same streams, as timelines kept before cut-off requests were:
    only r0's first stall meets a first token, 1 of 4, under half."""
    r = Requests.of(timelines(BESIDE_A_CUT_OFF[:2], STALLS_BESIDE_A_CUT_OFF))
    stalls = find_stalls(r, itl_ms=10.0)
    assert list(stalls.coinciding) == [True, False, False, False]
    assert interference(r, "chat", {"itl_ms": 250.0}, stalls) is None


def test_cut_off_requests_first_tokens_count_in_the_ttft_fit_not_in_the_share():
    """Seven finished requests are too few for a fit; with two requests the
    run's end cut off after their first token, on the same line (TTFT = 50 ms
    + 100 ms per 1k input tokens), there are nine: prefill-bound, saying two
    were cut off. The share of the miss is the finished ones' alone (the
    SLO's requests). A request cut off before its first token has no TTFT
    and is in no fit."""
    rows = [
        {"start_s": 10.0 * i, "ttft_ms": 50 + 100 * k, "e2e_ms": 2000, "input_tokens": 1000 * k}
        for i, k in enumerate(range(1, 8))
    ]
    cut = [
        {"start_s": 70.0 + 10.0 * i, "ttft_ms": 50 + 100 * k, "e2e_ms": 3000,
         "input_tokens": 1000 * k, "cut_off": True}
        for i, k in enumerate((8, 9))
    ]  # fmt: skip
    unanswered = {"start_s": 95.0, "ttft_ms": -1, "e2e_ms": 500, "input_tokens": 100,
                  "cut_off": True}  # fmt: skip
    limits = {"ttft_ms": 500.0}
    assert ttft_findings(Requests.of(timelines([*rows, unanswered])), "chat", limits) == []
    r = Requests.of(timelines([*rows, *cut, unanswered]))
    [found] = ttft_findings(r, "chat", limits)
    e = found.evidence
    assert found.cause == "prefill-bound"
    assert (e["ms_per_1k_tokens"], e["intercept_ms"], e["requests"], e["cut_off"]) == (
        100.0, 50.0, 9, 2
    )  # fmt: skip
    assert "9 requests, 2 of them cut off by the run's end after their first token" in found.text
    # of the finished requests' TTFTs (150..750 ms) 550, 650 and 750 ms miss:
    # their excess over the finished ones' 5th percentile (180 ms) is 370 + 470
    # + 570 ms; the slope's part over the nine lengths' 5th percentile (1.4k),
    # 360 + 460 + 560 ms of it: 1380 / 1410
    assert found.share == {"ttft_ms": 0.979}


def test_ttft_linear_in_input_length_is_prefill_bound_with_its_slope():
    # ten requests one after another (none in flight at any send), TTFT = 50 ms
    # + 100 ms per 1k input tokens, inputs 1k..10k
    rows = [
        {"start_s": 10.0 * i, "ttft_ms": 50 + 100 * k, "e2e_ms": 2000, "input_tokens": 1000 * k}
        for i, k in enumerate(range(1, 11))
    ]
    [found] = ttft_findings(Requests.of(timelines(rows)), "chat", {"ttft_ms": 500.0})
    assert found.cause == "prefill-bound"
    e = found.evidence
    assert (e["ms_per_1k_tokens"], e["intercept_ms"], e["rank_correlation"]) == (100.0, 50.0, 1.0)
    # fitted at the 10th and 90th percentile of length (1.9k, 9.1k): 240 -> 960 ms
    assert e["growth"] == 4.0
    # each missing request's excess over TTFT's 5th percentile (195 ms) is all
    # slope x (its length - length's 5th percentile, 1.45k)
    assert found.share == {"ttft_ms": 1.0}


def test_ttft_linear_in_the_tokens_the_server_did_not_cache_is_prefill_bound():
    # a slot keeps its prompt (llama.cpp): every input is 2k tokens, of which the
    # server reports 2k - 200 k cached; TTFT = 30 ms + 2000 ms per 1k computed
    # tokens, so it follows the 200 k computed tokens, not the (constant) input
    rows = [
        {
            "start_s": 10.0 * i,
            "ttft_ms": 30 + 400 * k,
            "e2e_ms": 5000,
            "input_tokens": 2000,
            "cached_tokens": 2000 - 200 * k,
        }
        for i, k in enumerate(range(1, 11))
    ]
    [found] = ttft_findings(Requests.of(timelines(rows)), "chat", {"ttft_ms": 1000.0})
    assert found.cause == "prefill-bound"
    e = found.evidence
    assert e["tokens"] == "uncached"
    assert (e["ms_per_1k_tokens"], e["intercept_ms"], e["rank_correlation"]) == (2000.0, 30.0, 1.0)
    # computed tokens' 10th and 90th percentiles 380 and 1820: 790 -> 3670 ms
    assert e["growth"] == 4.65
    assert "2000 ms per 1k tokens" in found.text and "prefix-cache hits" in found.text


def test_stalls_scale_with_the_prompt_tokens_the_server_computed():
    # INTERFERING's first tokens, the server reporting 2.5k and 3.8k of r1's and
    # r2's inputs cached: the stalls (300, 400, 400 ms) ending at them grew with
    # the 500 and 200 tokens computed, so the fit runs over those
    t = timelines(
        [
            {"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 3000, "input_tokens": 100},
            {"start_s": 0.7, "ttft_ms": 300, "e2e_ms": 2000, "input_tokens": 3000,
             "cached_tokens": 2500},
            {"start_s": 1.6, "ttft_ms": 400, "e2e_ms": 1000, "input_tokens": 4000,
             "cached_tokens": 3800},
        ],
        [(0, 1000, 300), (0, 2000, 400), (1, 1300, 400), (2, 900, 300)],
    )  # fmt: skip
    r = Requests.of(t)
    stalls = find_stalls(r, itl_ms=10.0)
    assert list(stalls.coinciding_inputs) == [500, 200, 200, 0]
    # r0 reported nothing cached: its whole input
    assert list(computed_tokens(r)) == [100, 500, 200]
    found = interference(r, "chat", {"itl_ms": 250.0}, stalls)
    assert found is not None
    # stalls 300, 400, 400 ms against 0.5k, 0.2k, 0.2k tokens: falling, so no
    # scaling is claimed
    assert "stall_ms_per_1k_input_tokens" not in found.evidence


def test_ttft_linear_in_requests_in_flight_is_queueing():
    # request i is sent while the i before it still run; TTFT = 100 + 200 i ms
    rows = [{"start_s": float(i), "ttft_ms": 100 + 200 * i, "e2e_ms": 100_000} for i in range(10)]
    [found] = ttft_findings(Requests.of(timelines(rows)), "chat", {"ttft_ms": 1000.0})
    assert found.cause == "queueing"
    assert found.evidence["ms_per_request_in_flight"] == 200.0
    assert found.evidence["in_flight_p10_p90"] == [0.9, 8.1]
    assert found.share == {"ttft_ms": 1.0}


def test_two_streams_at_a_time_while_eight_wait_is_a_concurrency_ceiling():
    # eight requests sent at 0, served two at a time: wave k's first token at
    # 0.1 + k s, its end 1 s later
    rows = [
        {"start_s": 0.0, "ttft_ms": 100 + 1000 * (i // 2), "e2e_ms": 1100 + 1000 * (i // 2)}
        for i in range(8)
    ]
    found = concurrency_ceiling(Requests.of(timelines(rows)), "chat", {"ttft_ms": 500.0})
    assert found is not None
    e = found.evidence
    assert e["ceiling"] == 2 and e["in_flight_max"] == 8
    # more than two in flight from 0 until 3.1 s of the 4.1 s window (sampled
    # at 512 instants)
    assert e["time_with_more_in_flight"] == pytest.approx(3.1 / 4.1, abs=0.005)
    # waves wait 0, 0, 1, 1, 2, 2, 3, 3 s with two streams decoding: median 1.5 s
    assert e["wait_ms_median"] == 1500.0
    assert found.share == {"ttft_ms": 1.0}


def test_first_turns_ten_times_slower_than_later_ones_are_a_cache_effect():
    rows = [{"start_s": float(i), "ttft_ms": 1000, "e2e_ms": 1500, "turn": 0} for i in range(4)]
    rows += [
        {"start_s": 10.0 + i, "ttft_ms": 100, "e2e_ms": 500, "turn": 1, "input_tokens": 900}
        for i in range(4)
    ]
    found = cache_effect(Requests.of(timelines(rows)), "chat", {"ttft_ms": 500.0})
    assert found is not None
    e = found.evidence
    assert e["by"] == "turn"
    assert (e["ttft_ms_first_turn"], e["ttft_ms_later_turns"]) == (1000.0, 100.0)
    assert (e["input_tokens_first_turn"], e["input_tokens_later_turns"]) == (500.0, 900.0)
    # first turns miss by 900 ms over the fastest (100 ms): all of it the cold prefix
    assert found.share == {"ttft_ms": 1.0}


def test_prefix_cache_misses_slower_than_hits_are_a_cache_effect():
    # the server reported cached tokens: 4 misses (0 cached) at 800 ms, 4 hits
    # (400 cached) at 200 ms, whatever their turn
    rows = [
        {"start_s": float(i), "ttft_ms": 800, "e2e_ms": 1500, "cached_tokens": 0} for i in range(4)
    ]
    rows += [
        {"start_s": 10.0 + i, "ttft_ms": 200, "e2e_ms": 900, "cached_tokens": 400} for i in range(4)
    ]
    found = cache_effect(Requests.of(timelines(rows)), "chat", {"ttft_ms": 500.0})
    assert found is not None
    e = found.evidence
    assert e["by"] == "prefix-cache hit" and (e["misses"], e["hits"]) == (4, 4)
    assert (e["ttft_ms_misses"], e["ttft_ms_hits"]) == (800.0, 200.0)
    # misses exceed the fastest (200 ms) by 600 ms, all of it over the hits' median
    assert found.share == {"ttft_ms": 1.0}


def test_a_ttft_long_gap_no_first_token_explains_is_a_preemption_sign():
    rows = [{"start_s": 10.0 * i, "ttft_ms": 200, "e2e_ms": 3000} for i in range(8)]
    # request 0's 900 ms gap ends at 2 s, no first token near it; the floor is
    # max(0.5 x 200, 10 x 10) = 100 ms
    r = Requests.of(timelines(rows, [(0, 2000, 900)]))
    found = preemption(r, "chat", {"e2e_ms": 2500.0}, find_stalls(r, 10.0))
    assert found is not None
    assert found.evidence == {
        "gaps": 1,
        "requests": 1,
        "gap_ms_max": 900.0,
        "gap_ms_median": 900.0,
        "ttft_ms_median": 200.0,
    }
    # every E2E is 3000 ms: none over the fastest, so no share of the miss
    assert found.share == {"e2e_ms": 0.0}


def test_no_failed_latency_slo_no_timeline_finding():
    assert timeline_findings(INTERFERING, {"chat": {}}) == []
    assert timeline_findings(INTERFERING, {}) == []
    assert [f.cause for f in timeline_findings(INTERFERING, {"chat": {"itl_ms": 250.0}})] == [
        "prefill interference"
    ]


def test_long_gaps_are_a_streams_longest_over_twice_its_mean():
    # gaps 10, 10, 100, 10 ns: mean 32.5, so only the 100 qualifies; it ends at
    # chunk 120, 220 ns after the start at -100
    assert long_gaps([0, 10, 20, 120, 130], [10, 10, 100, 10], start_ns=-100) == [(220, 100)]
    assert long_gaps([0, 10], [10], start_ns=0) == []
    assert long_gaps([5, 5, 5], [0, 0], start_ns=0) == []


def test_a_later_turn_prefills_only_what_the_turn_before_did_not_send():
    from slogate.analysis.diagnosis.causes import prefill_tokens

    t = timelines(
        [
            {"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 1000, "input_tokens": 500},
            # another user's conversation 0, turn 0, ended earlier: not the latest
            {"start_s": 0.0, "ttft_ms": 100, "e2e_ms": 500, "input_tokens": 50},
            {"start_s": 2.0, "ttft_ms": 50, "e2e_ms": 1000, "input_tokens": 800, "turn": 1},
            # turn 1 of a conversation whose turn 0 is not in the run
            {"start_s": 2.0, "ttft_ms": 50, "e2e_ms": 1000, "input_tokens": 900, "turn": 1,
             "conversation": 7},
        ]
    )  # fmt: skip
    r = Requests.of(t)
    # 800 - (500 input + 100 output of the turn that ended last, at 1.0 s)
    assert list(prefill_tokens(r, r.ok)) == [500, 50, 200, 900]


def record(start_ns: int, chunks: list[int], turn: int = 0) -> RequestRecord:
    r = RequestRecord(scenario="chat", start_ns=start_ns, end_ns=chunks[-1] + MS, turn=turn)
    r.chunk_ns = chunks
    r.chunk_chars = [4] * len(chunks)
    r.output_tokens = len(chunks)
    r.input_tokens = 700
    return r


def test_a_record_leaves_its_row_and_its_stalls():
    t = Timelines()
    chunks = [100 * MS, 110 * MS, 120 * MS, 620 * MS, 630 * MS]
    rec = record(0, chunks)
    t.add(rec, request_metrics(rec), end_wall_s=50.0, warmup=False)
    assert len(t) == 1
    # E2E is 631 ms: the start on the wall clock is 50 - 0.631 s
    assert t.columns["start_s"][0] == pytest.approx(49.369)
    assert (t.columns["ttft_ms"][0], t.columns["e2e_ms"][0]) == (100.0, 631.0)
    assert t.columns["input_tokens"][0] == 700
    # the 500 ms gap (mean 132.5) ends 620 ms after the start
    assert (list(t.gap_row), list(t.gap_end_ms), list(t.gap_ms)) == ([0], [620.0], [500.0])


def test_a_cut_off_request_leaves_its_send_and_first_token_flagged_and_no_latency():
    """Sent at 0, its first chunk at 100 ms, a 500 ms gap, then the run's end
    cut it at 700 ms (``end_ns``): its row says when it was sent and when its
    first token came, flagged cut off and not ok; no TPOT and no gaps, and
    none of the recorder's histograms or counters holds it."""
    rec = record(0, [100 * MS, 110 * MS, 120 * MS, 620 * MS, 630 * MS])
    rec.end_ns = 700 * MS
    rec.input_tokens = None  # the usage chunk never came
    recorder = Recorder()
    recorder.record_cut_off(rec, wall_s=50.0, warmup=False)
    t = recorder.timelines
    assert recorder.buckets == {} and recorder.windows == {}
    assert t.columns["start_s"][0] == pytest.approx(49.3)
    assert (t.columns["ttft_ms"][0], t.columns["e2e_ms"][0]) == (100.0, 700.0)
    assert (t.columns["tpot_ms"][0], t.columns["input_tokens"][0]) == (UNKNOWN, UNKNOWN)
    assert {name: t.flags[name][0] for name in FLAGS} == {"ok": 0, "warmup": 0, "cut_off": 1}
    assert len(t.gap_row) == 0
    assert Timelines.decode(t.encode()).encode() == t.encode()


def test_timelines_round_trip_and_merge_with_their_scenarios_remapped():
    a = timelines([{"start_s": 0.0, "ttft_ms": 1, "e2e_ms": 2}])
    other = sender(USER, 1, 0)  # the first user of a second load process
    b = Timelines.decode(
        timelines(
            [{"start_s": 5.0, "ttft_ms": 3, "e2e_ms": 4, "user": other}], [(0, 1.0, 2.0)]
        ).encode()
    )
    b.scenarios = ["code"]
    a.extend(b)
    assert a.scenarios == ["chat", "code"] and list(a.scenario) == [0, 1]
    assert list(a.user) == [0, other] and sender_parts(other) == ("user", 1, 0)
    assert list(a.columns["start_s"]) == [0.0, 5.0]
    assert list(a.gap_row) == [1]
    assert Timelines.decode(a.encode()).encode() == a.encode()


def test_a_record_leaves_its_sender_and_older_timelines_still_read():
    t = Timelines()
    rec = record(0, [100 * MS, 110 * MS, 120 * MS])
    rec.user = sender(SLOT, 0, 3)
    t.add(rec, request_metrics(rec), end_wall_s=50.0, warmup=False)
    assert list(t.user) == [sender(SLOT, 0, 3)] and t.encode()["user"] == [2**48 + 3]
    saved = timelines([{"start_s": 0.0, "ttft_ms": 1, "e2e_ms": 2}] * 2).encode()
    del saved["user"], saved["cut_off"]
    older = Timelines.decode(saved)
    assert list(older.user) == [UNKNOWN_USER] * 2
    assert list(older.flags["cut_off"]) == [0, 0]  # kept before cut-off requests were


def test_timelines_past_the_cap_are_counted_not_kept():
    full = Timelines(scenarios=["chat"], scenario=array("i", [0] * MAX_REQUESTS))
    for name in COLUMNS:
        full.columns[name] = array("d", [0.0] * MAX_REQUESTS)
    for name in FLAGS:
        full.flags[name] = array("b", [1] * MAX_REQUESTS)
    full.extend(timelines([{"start_s": 0.0, "ttft_ms": 1, "e2e_ms": 2}] * 3, [(0, 1.0, 2.0)]))
    assert len(full) == MAX_REQUESTS and full.dropped == 3 and len(full.gap_row) == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ttft_ms": [1.0, 2.0]}, "column ttft_ms has 2 rows, not 1"),
        ({"scenario": [3]}, "scenario index out of range"),
        ({"user": [0, 1]}, "column user has 2 rows, not 1"),
        ({"gaps": {"row": [5], "end_ms": [1.0], "gap_ms": [1.0]}}, "a gap of a row"),
    ],
)
def test_malformed_timelines_are_refused_naming_what(change, message):
    data = {**timelines([{"start_s": 0.0, "ttft_ms": 1, "e2e_ms": 2}]).encode(), **change}
    with pytest.raises(ValueError, match=message):
        Timelines.decode(data)


def test_computed_tokens_never_fall_below_zero():
    # an input counted by a tokenizer (480) short of the server's cached count (500)
    t = timelines([{"start_s": 0.0, "ttft_ms": 50, "e2e_ms": 500, "input_tokens": 480,
                    "cached_tokens": 500}])  # fmt: skip
    assert list(computed_tokens(Requests.of(t))) == [0]
