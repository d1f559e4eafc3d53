"""Per-request metrics and the recorder, on timestamps whose results are worked
out by hand in the comments (times in ms; records hold ns)."""

from __future__ import annotations

import random

import pytest

from slogate.analysis.measurement.histograms import HistogramSet
from slogate.analysis.measurement.percentiles import estimate
from slogate.analysis.measurement.recorder import OVERALL, GoodputLimits, Recorder
from slogate.analysis.measurement.records import CountMethod, ErrorKind, RequestRecord
from slogate.analysis.measurement.request_metrics import (
    ChunkTokenMethod,
    apportion,
    request_metrics,
)

MS = 1_000_000


def record(**fields: object) -> RequestRecord:
    """Start 1000 ms; output chunks at 1100, 1120, 1140, 1180; end 1200."""
    base = {
        "scenario": "chat",
        "start_ns": 1000 * MS,
        "end_ns": 1200 * MS,
        "chunk_ns": [1100 * MS, 1120 * MS, 1140 * MS, 1180 * MS],
        "chunk_chars": [1, 1, 2, 4],
    }
    base.update(fields)
    return RequestRecord(**base)


def test_no_counts_at_all_means_one_token_per_chunk() -> None:
    m = request_metrics(record())
    assert m.ttft_ns == 100 * MS  # 1100 - 1000
    assert m.e2e_ns == 200 * MS  # 1200 - 1000
    assert m.chunk_gaps_ns == [20 * MS, 20 * MS, 40 * MS]
    assert m.max_stall_ns == 40 * MS
    assert m.itl_ns == [(20 * MS, 1), (20 * MS, 1), (40 * MS, 1)]
    assert m.tpot_ns == pytest.approx(80 * MS / 3)  # (1180 - 1100) / (4 - 1)
    assert (m.output_tokens, m.count_method) == (4, CountMethod.CHUNKS)
    assert m.chunk_token_method is ChunkTokenMethod.ONE_PER_CHUNK
    assert (m.ttft_sched_ns, m.e2e_sched_ns, m.lag_ns) == (None, None, None)


def test_usage_total_spread_by_text_length() -> None:
    # 8 tokens over chars [1, 1, 2, 4]: one each, the 4 spare in shares
    # [0.5, 0.5, 1, 2] -> floors [0, 0, 1, 2], one left for the largest remainder
    # (the first 0.5) -> [1, 0, 1, 2] + 1 each = [2, 1, 2, 3]
    assert apportion(8, [1, 1, 2, 4]) == [2, 1, 2, 3]
    m = request_metrics(record(output_tokens=8))
    assert (m.output_tokens, m.count_method) == (8, CountMethod.USAGE)
    assert m.chunk_token_method is ChunkTokenMethod.PROPORTIONAL
    # gaps 20, 20, 40 over 1, 2, 3 tokens: 20/1, 20/2, 40/3
    assert m.itl_ns == [(20 * MS, 1), (10 * MS, 2), (pytest.approx(40 * MS / 3), 3)]
    assert m.tpot_ns == pytest.approx(80 * MS / 7)  # (1180 - 1100) / (8 - 1)


def test_exact_per_chunk_tokens_and_a_tokenless_chunk_carrying_its_gap() -> None:
    # tokens [1, 2, 0, 3]: the third chunk carries none, so its 20 ms gap joins the
    # next chunk's 40 ms: 60 ms over 3 tokens
    m = request_metrics(record(chunk_tokens=[1, 2, 0, 3], output_tokens=6))
    assert m.chunk_token_method is ChunkTokenMethod.EXACT
    assert m.itl_ns == [(10 * MS, 2), (20 * MS, 3)]
    assert sum(k for _, k in m.itl_ns) == 5  # every token but the first chunk's


def test_scheduled_start_gives_lag_and_scheduled_latencies() -> None:
    m = request_metrics(record(scheduled_ns=995 * MS))
    assert m.lag_ns == 5 * MS  # started 5 ms after it was due
    assert m.ttft_sched_ns == 105 * MS
    assert m.e2e_sched_ns == 205 * MS


def test_single_chunk_has_no_itl_and_no_tpot() -> None:
    m = request_metrics(record(chunk_ns=[1100 * MS], chunk_chars=[3]))
    assert (m.itl_ns, m.chunk_gaps_ns, m.max_stall_ns, m.tpot_ns) == ([], [], None, None)


def test_recorder_counts_and_histograms() -> None:
    recorder = Recorder(goodput={"chat": GoodputLimits(ttft_ms=150, tpot_ms=20)})
    fast = record(output_tokens=8, input_tokens=30)  # TTFT 100, TPOT 11.4: good
    slow = record(start_ns=900 * MS, output_tokens=8, input_tokens=30)  # TTFT 200: not good
    failed = record().fail(ErrorKind.TIMEOUT_STALL, "no output for 60 s", 1500 * MS)
    for r in (fast, slow, failed):
        recorder.record(r, wall_s=10.0)
    bucket = recorder.bucket("chat", OVERALL)
    counters = bucket.counters
    assert (counters.ok, counters.failed, counters.good) == (2, 1, 1)
    assert dict(counters.errors) == {"timeout_stall": 1}
    assert (counters.output_tokens, counters.input_tokens) == (16, 60)
    assert dict(counters.count_methods) == {"usage": 2}
    hist = bucket.histograms
    ttft = hist.histogram("ttft")
    assert ttft.get_total_count() == 2  # the failed request never enters latency
    # HDR keeps 3 significant digits: min/max come back within 0.1% (in us)
    assert ttft.get_min_value() == pytest.approx(100_000, rel=1e-3)
    assert ttft.get_max_value() == pytest.approx(200_000, rel=1e-3)
    # ITL: per request 1 x 20 ms + 2 x 10 ms + 3 x 13.333 ms = 6 samples, 12 in all
    itl = hist.histogram("itl")
    assert itl.get_total_count() == 12
    assert estimate(itl, 50).value == pytest.approx(13_333, rel=1e-3)  # rank 6 of 12
    assert hist.histogram("chunk_gap").get_total_count() == 6
    assert estimate(hist.histogram("max_stall"), 100).value == pytest.approx(40_000, rel=1e-3)
    assert hist.histogram("ttft_turn_1").get_total_count() == 2


def test_warmup_requests_stay_out_of_the_run_bucket() -> None:
    recorder = Recorder()
    recorder.record(record(), wall_s=1.0, stage="ramp", warmup=True)
    assert ("chat", OVERALL) not in recorder.buckets
    assert recorder.bucket("chat", "stage:ramp").counters.ok == 1


def test_batch_recording_equals_one_value_at_a_time() -> None:
    rng = random.Random(7)
    values = [
        rng.choice([rng.uniform(-5e3, 5e6), rng.lognormvariate(15, 3), 499.9, 500.0, 4e15])
        for _ in range(5000)
    ]
    counts = [rng.randint(1, 5) for _ in values]
    one, batch = HistogramSet(), HistogramSet()
    for value, count in zip(values, counts, strict=True):
        one.record_ns("x", value, count)
    batch.record_many_ns("x", values, counts)
    assert one.encode() == batch.encode()
    a, b = one.histogram("x"), batch.histogram("x")
    assert (a.get_min_value(), a.get_max_value(), a.get_total_count()) == (
        b.get_min_value(),
        b.get_max_value(),
        b.get_total_count(),
    )


def test_lag_is_split_by_cause_and_the_parts_sum_to_it() -> None:
    # due 990, the dispatcher waited 3 ms for it to be built, send started 1000
    # (7 ms more), connected 1001 (1 ms), written 1001.5 (0.5 ms): lag 11.5 ms
    m = request_metrics(
        record(scheduled_ns=990 * MS, prepare_wait_ns=3 * MS, connected_ns=1001 * MS,
               sent_ns=1001 * MS + MS // 2)
    )  # fmt: skip
    parts = m.lag_parts
    assert (parts.prepare_ns, parts.dispatch_ns) == (3 * MS, 7 * MS)
    assert (parts.connect_ns, parts.write_ns) == (MS, MS // 2)
    assert m.lag_ns == 11 * MS + MS // 2 == sum(v for _, v in parts.items())


def test_a_request_built_in_time_on_an_idle_connection_lags_by_dispatch_and_write() -> None:
    # built before its instant 990, reused connection, written at 1000.2
    m = request_metrics(
        record(scheduled_ns=990 * MS, connected_ns=1000 * MS, sent_ns=1000 * MS + MS // 5)
    )
    assert [v for _, v in m.lag_parts.items()] == [0, 0, 10 * MS, 0, MS // 5]
    assert m.lag_ns == 10 * MS + MS // 5


def test_no_lag_parts_without_a_schedule_or_a_write() -> None:
    assert request_metrics(record(sent_ns=1001 * MS)).lag_parts is None
    assert request_metrics(record(scheduled_ns=990 * MS)).lag_parts is None
