"""Diagnosis: each troubleshooting path claims its cause with numbers, and only with them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reportdata import read_together, request

from slogate.analysis.diagnosis.diagnose import diagnose, findings_to_dicts
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.summary import build_summary
from slogate.analysis.measurement.bands import length_band, tpot_band, ttft_band
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.reports import write_results

MS = 1_000_000
HDR = 2e-3  # histograms keep 3 significant digits


def run_of(
    records, slo=None, load=None, server_metrics=None, generator=None, measured_s=10.0
) -> RunData:
    recorder = Recorder()
    for r in records:
        recorder.record(r, wall_s=1.0)
    meta = {
        "measured_s": measured_s,
        "complete": True,
        "generator": generator or {},
        "scenarios": {"chat": {"slo": slo or [], "load": load or {"users": 4}}},
    }
    return RunData(meta=meta, buckets=recorder.buckets, server_metrics=server_metrics or [])


TTFT_P99 = {"metric": "ttft_ms", "stat": "p50", "limit": 200.0, "kind": "max"}


def engine_sample(t_s, **series):
    return {"t_s": t_s, "source": "engine", "engine": "vllm", "series": series, "counters": {}}


def test_a_healthy_run_gets_no_findings():
    run = run_of(
        [request(50) for _ in range(50)],
        slo=[TTFT_P99],
        server_metrics=[engine_sample(t, running=3, waiting=0, kv_cache_usage=0.2) for t in (0, 5)],
    )
    assert diagnose(run) == []


def test_engine_queue_and_full_kv_cache_explain_a_ttft_failure():
    samples = [
        engine_sample(0, running=10, waiting=0, kv_cache_usage=0.5, preemptions_total=0),
        engine_sample(5, running=64, waiting=12, kv_cache_usage=0.97, preemptions_total=3),
        engine_sample(10, running=64, waiting=30, kv_cache_usage=0.99, preemptions_total=9),
    ]
    run = run_of([request(900) for _ in range(40)], slo=[TTFT_P99], server_metrics=samples)
    findings = diagnose(run)
    by_text = {f.text.split(":")[0]: f for f in findings}
    queue = by_text["Requests waited in the engine's queue"]
    assert queue.cause == "capacity-bound"
    assert {f.cause for f in findings if "KV" in f.text} == {"KV cache full"}
    assert queue.evidence["waiting_max"] == 30 and queue.evidence["scrapes_with_queue"] == 2
    assert "up to 30 waiting while up to 64 ran" in queue.text
    assert queue.explains == ("chat: ttft_ms p50 <= 200",)
    kv = by_text["The KV cache was near full"]
    assert kv.evidence["kv_usage_max"] == 0.99 and "99%" in kv.text
    preempted = next(f for f in findings if "preempted" in f.text)
    assert preempted.evidence["preemptions"] == 9


def test_errors_are_admission_limits_with_counts_and_shares():
    records = [request(50) for _ in range(90)]
    for _ in range(10):
        failed = RequestRecord(scenario="chat", start_ns=0)
        records.append(failed.fail(ErrorKind.HTTP_429, "Too Many Requests", 1000))
    slo = [{"metric": "error_rate", "stat": "rate", "limit": 0.01, "kind": "max"}]
    findings = diagnose(run_of(records, slo=slo))
    assert len(findings) == 1
    f = findings[0]
    assert f.cause == "admission limits"
    assert f.evidence == {"errors": 10, "requests": 100, "share": 0.1, "kind": "http_429"}
    assert "10 of 100 requests (10.0%) were refused with HTTP 429" in f.text
    assert f.explains == ("chat: error_rate rate <= 0.01",)


def test_open_loop_that_cannot_keep_up_is_capacity_bound():
    run = run_of(
        [request(300) for _ in range(40)],
        load={"rate": {"rps": 10.0, "arrival": "poisson"}},
        measured_s=10.0,
    )
    (f,) = diagnose(run)
    assert f.cause == "capacity-bound"
    # E2E is 300 + 31 x 20 + 1 = 921 ms: requests arriving in the window's last
    # 0.921 s cannot finish in it, so a server keeping up completes 9.079/s.
    assert f.evidence["offered_per_s"] == 10.0 and f.evidence["completed_per_s"] == 4.0
    assert f.evidence["expected_per_s"] == pytest.approx(9.079, rel=HDR)
    assert "10 requests/s arrived, 4.00/s completed, 44% of the 9.08/s" in f.text


def test_open_loop_that_keeps_up_says_nothing():
    """8.2/s completed of 10/s offered: short of the rate, but not of the 9.08/s that
    can complete in the window (the last E2E's arrivals are still running)."""
    run = run_of([request(300) for _ in range(82)], load={"rate": {"rps": 10.0}})
    assert diagnose(run) == []


def test_a_queue_seen_in_one_scrape_is_no_claim():
    samples = [engine_sample(t, running=2, waiting=w) for t, w in ((0, 0), (5, 1), (10, 0))]
    assert diagnose(run_of([request(50) for _ in range(20)], server_metrics=samples)) == []


def test_generator_lag_voids_the_verdicts_and_comes_first():
    run = run_of(
        [request(50) for _ in range(20)] + [request(900) for _ in range(20)],
        slo=[TTFT_P99],
        generator={"lag_p99_ms": 180.0, "max_lag_ms": 50.0},
        server_metrics=[engine_sample(0, waiting=4), engine_sample(5, waiting=6)],
    )
    findings = diagnose(run)
    assert findings[0].cause == "load generator"
    assert findings[0].evidence == {"lag_p99_ms": 180.0, "max_lag_ms": 50.0, "lag_cause_p99_ms": {}}
    assert "180.0 ms" in findings[0].text


def test_chunks_read_together_are_counted_and_claimed_above_one_percent(tmp_path):
    # 10 requests x 31 gaps = 310 gaps; 2 requests with 3 pairs read together = 6 (1.9%)
    records = [request(50) for _ in range(8)] + [read_together(request(50), 3) for _ in range(2)]
    run = run_of(records)
    c = run.overall("chat").counters
    assert (c.chunk_gaps, c.same_read_gaps) == (310, 6)
    gaps = build_summary(run)["scenarios"]["chat"]["chunk_gaps"]
    assert gaps == {
        "total": 310,
        "same_read": 6,
        "same_read_share": round(6 / 310, 6),
        "same_read_stalled": 0,
        "same_read_stalled_share": 0.0,
    }
    write_results(tmp_path, run)
    page = (tmp_path / "report.html").read_text()
    assert "Gaps between output chunks: 310, of which 6 (1.94%) were 0" in page
    (finding,) = [f for f in diagnose(run) if f.cause == "load generator"]
    evidence = {"same_read_gaps": 6, "chunk_gaps": 310, "share": 6 / 310, "stalled_gaps": 0}
    assert finding.evidence == evidence
    assert "1.9% of the gaps between output chunks (6 of 310) were 0" in finding.text
    assert "the engine sent those events together" in finding.text
    assert finding.metrics == ("itl_ms",)
    # read while the loop was stalled, they are the generator's
    stalled = [request(50) for _ in range(8)]
    stalled += [replace(read_together(request(50), 3), stalled_same_reads=2) for _ in range(2)]
    (finding,) = [f for f in diagnose(run_of(stalled)) if f.cause == "load generator"]
    assert finding.evidence["stalled_gaps"] == 4
    assert "4 of them were read while the load generator's loop was stalled" in finding.text
    # 3 of 310 is under 1%: no claim
    fewer = run_of([request(50) for _ in range(9)] + [read_together(request(50), 3)])
    assert not [f for f in diagnose(fewer) if f.cause == "load generator"]


def test_ttft_rising_with_input_length_bands_is_prefill_bound():
    records = [
        request(ttft_ms, input_tokens=input_tokens)
        for input_tokens, ttft_ms in ((256, 40), (1024, 120), (4096, 600))
        for _ in range(20)
    ]  # the recorder files each TTFT under its input-length band
    (f,) = diagnose(run_of(records, slo=[TTFT_P99]))
    assert f.cause == "prefill-bound"
    bands = {"256-511": 40.0, "1024-2047": 120.0, "4096-8191": 600.0}
    assert f.evidence["bands"] == pytest.approx(bands, rel=HDR)
    assert f.evidence["growth"] == pytest.approx(15.0, rel=HDR)
    assert f.evidence["rank_correlation"] == 1.0
    assert "x15.0 for x16 the tokens" in f.text


def test_flat_ttft_across_bands_makes_no_prefill_claim():
    run = run_of([request(40, input_tokens=0) for _ in range(10)])
    hist = run.overall("chat").histograms
    for lower in (256, 1024, 4096):
        for _ in range(20):
            hist.record_ns(ttft_band(lower), 40 * MS)
    assert diagnose(run) == []


def test_ttft_rising_with_turn_index():
    records = []
    for turn, ttft in enumerate((40, 80, 200, 400)):
        for _ in range(10):
            r = request(ttft)
            r.turn = turn
            records.append(r)
    (f,) = diagnose(run_of(records))
    assert f.cause == "prefill-bound"
    turns = {"1": 40.0, "2": 80.0, "3": 200.0, "4": 400.0}
    assert f.evidence["turns"] == pytest.approx(turns, rel=HDR)


def test_tpot_rising_with_context_is_attention_and_kv_reads():
    slo = [{"metric": "tpot_ms", "stat": "p50", "limit": 25.0, "kind": "max"}]
    run = run_of([request(40, itl_ms=30, input_tokens=0) for _ in range(10)], slo=slo)
    hist = run.overall("chat").histograms
    for lower, tpot_ms in ((512, 20), (2048, 26), (8192, 38)):
        for _ in range(20):
            hist.record_ns(tpot_band(lower + 100), tpot_ms * MS)
    (f,) = diagnose(run)
    assert f.cause == "attention / KV reads"
    assert f.evidence["growth"] == pytest.approx(1.9, rel=HDR)
    assert f.explains == ("chat: tpot_ms p50 <= 25",)
    assert findings_to_dicts([f])[0]["explains"] == ["chat: tpot_ms p50 <= 25"]


def test_bands_with_too_few_samples_are_ignored():
    run = run_of([request(40, input_tokens=0) for _ in range(10)])
    hist = run.overall("chat").histograms
    for lower, ttft_ms in ((256, 40), (1024, 120), (4096, 600)):
        hist.record_ns(ttft_band(lower), ttft_ms * MS)
    assert diagnose(run) == []


def test_length_band_is_the_power_of_two_below():
    assert (ttft_band(3000), tpot_band(3000 + 200)) == ("ttft_in_2048", "tpot_ctx_2048")
    assert [length_band(n) for n in (0, 1, 2, 3, 511, 512, 513, 4095)] == [
        0,
        1,
        2,
        2,
        256,
        512,
        512,
        2048,
    ]


def test_a_failed_run_no_finding_explains_says_so(tmp_path):
    run = run_of([request(900) for _ in range(40)], slo=[TTFT_P99])
    assert diagnose(run) == []
    write_results(tmp_path, run)
    text = "No explanation found in the run's data for its failed SLOs."
    assert text in (tmp_path / "summary.md").read_text()
    assert text in (tmp_path / "report.html").read_text()


def test_the_why_section_ranks_what_explains_with_share_engine_and_action(tmp_path):
    # request i sent at 0.1 i s with TTFT 100 + 200 i ms: each waits behind the
    # ones sent before it, still running
    recorder = Recorder()
    for i in range(10):
        record = request(100 + 200 * i)
        recorder.record(record, wall_s=0.1 * i + (record.end_ns - record.start_ns) / 1e9)
    samples = [engine_sample(t, running=4, waiting=w) for t, w in ((0, 0), (5, 3), (10, 6))]
    run = run_of([], slo=[TTFT_P99], server_metrics=samples)
    run.buckets, run.timelines = recorder.buckets, recorder.timelines
    findings = diagnose(run)
    # only two or three streams decode at once (each 0.62 s after its first
    # token) while up to eight are in flight: a ceiling, and a queue
    assert {f.cause for f in findings[:2]} == {"queueing", "concurrency ceiling"}
    shares = [f.share["ttft_ms"] for f in findings if f.share]
    assert shares == sorted(shares, reverse=True) and len(shares) == 2
    first = next(f for f in findings if f.cause == "queueing")
    assert first.explains == ("chat: ttft_ms p50 <= 200",)
    assert first.share["ttft_ms"] >= 0.5
    assert first.confirmation == "agree"
    assert "up to 6 waiting, non-empty in 2 of 3 scrapes" in first.engine_text
    assert first.action.startswith("Try on vLLM:")
    write_results(tmp_path, run)
    markdown = (tmp_path / "summary.md").read_text()
    assert "- **queueing** (chat): Queueing: TTFT rises" in markdown
    assert "  - engine metrics agree: engine waiting queue" in markdown
    page = (tmp_path / "report.html").read_text()
    why = page[page.index('id="diagnosis"') :]
    assert why.index("<b>queueing</b>") < why.index("<b>capacity-bound</b>")
    assert f"{round(100 * first.share['ttft_ms'])}% of the ttft_ms miss" in why
    assert "engine metrics agree" in why and "Try on vLLM" in why


def test_prefill_findings_read_llama_cpps_own_prompt_time():
    from slogate.analysis.diagnosis.confirmation import confirm

    # 4,000 prompt tokens computed in 10 s between the first and last scrape:
    # 2,500 ms per 1k; the queue empty, two requests decoding together
    samples = [
        engine_sample(t, running=2, waiting=0, prompt_tokens_total=tokens, prompt_seconds_total=s)
        for t, tokens, s in ((0, 1000, 2.0), (5, 3000, 7.0), (10, 5000, 12.0))
    ]
    for cause in ("prefill-bound", "prefill interference"):
        state, text = confirm(cause, samples)
        assert state == "agree"
        assert "engine prompt time: 2500 ms per 1k prompt tokens computed" in text
        assert "(4000 tokens in 10.0 s, summed over requests)" in text
    # an engine without the counter says nothing of it
    state, text = confirm("prefill-bound", [engine_sample(t, waiting=0) for t in (0, 5)])
    assert state == "agree" and "prompt time" not in text
