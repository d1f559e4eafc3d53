"""TTFT taken apart: the split of one request by hand, its histograms and
requests.jsonl line, and the diagnosis that names the part most of a TTFT
miss was spent in."""

from __future__ import annotations

import pytest

from slogate.analysis.diagnosis.causes import timeline_findings
from slogate.analysis.documents.export import request_line
from slogate.analysis.measurement.recorder import Bucket, Gaps, record_into
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import TtftSplit, request_metrics
from slogate.analysis.measurement.timelines import COLUMNS, UNKNOWN, Timelines

MS = 1_000_000


def timed(queue_ms: float | None, prefill_ms: float | None) -> RequestRecord:
    """A request sent at 1 s whose first output chunk came 250 ms later."""
    start = 1_000 * MS
    return RequestRecord(
        "s",
        start_ns=start,
        end_ns=start + 400 * MS,
        chunk_ns=[start + 250 * MS, start + 400 * MS],
        chunk_chars=[3, 3],
        output_tokens=2,
        input_tokens=40,
        engine_queue_ms=queue_ms,
        engine_prefill_ms=prefill_ms,
        engine_prompt_tokens=40,
    )


def test_ttft_splits_into_outside_queue_and_prefill() -> None:
    # 250 ms TTFT - 40.5 queue - 162.65 prefill = 46.85 ms outside
    split = request_metrics(timed(40.5, 162.65)).ttft_split
    assert split == TtftSplit(outside_ns=46_850_000, queue_ns=40_500_000, prefill_ns=162_650_000)


def test_without_a_queue_the_engines_wait_is_outside() -> None:
    # llama.cpp: 250 - 162.65 = 87.35 ms before or after the engine's clock
    split = request_metrics(timed(None, 162.65)).ttft_split
    assert split == TtftSplit(outside_ns=87_350_000, queue_ns=None, prefill_ns=162_650_000)


def test_no_prefill_time_no_split() -> None:
    assert request_metrics(timed(3.0, None)).ttft_split is None


def test_an_engine_clock_past_the_clients_leaves_outside_negative() -> None:
    # 250 - 10 - 245 = -5 ms: the clocks disagree by that much
    assert request_metrics(timed(10.0, 245.0)).ttft_split.outside_ns == -5 * MS


def test_the_split_is_histogrammed_and_written_per_request() -> None:
    record = timed(40.5, 162.65)
    m = request_metrics(record)
    bucket = Bucket()
    record_into(bucket, record, m, True, Gaps.of(m))
    hist = bucket.histograms
    # HDR keeps 3 significant digits: 46.85 ms is recorded within 0.1%
    assert hist.histogram("ttft_outside").get_value_at_percentile(50) == pytest.approx(
        46_850, rel=1e-3
    )
    assert hist.histogram("ttft_queue").get_value_at_percentile(50) == pytest.approx(
        40_500, rel=1e-3
    )
    assert hist.histogram("ttft_prefill").get_value_at_percentile(50) == pytest.approx(
        162_650, rel=1e-3
    )
    line = request_line(record, m, end_wall_s=10.0, stage=None, warmup=False)
    assert line["ttft_split_ms"] == {"outside": 46.85, "queue": 40.5, "prefill": 162.65}
    assert line["engine_prompt_tokens"] == 40
    assert line["ttft_ms"] == 250.0


def test_a_negative_outside_is_histogrammed_as_zero_and_kept_in_the_line() -> None:
    record = timed(10.0, 245.0)
    m = request_metrics(record)
    bucket = Bucket()
    record_into(bucket, record, m, True, Gaps.of(m))
    assert bucket.histograms.histogram("ttft_outside").get_max_value() == 0
    line = request_line(record, m, end_wall_s=10.0, stage=None, warmup=False)
    assert line["ttft_split_ms"]["outside"] == -5.0


# -- the diagnosis ---------------------------------------------------------------------
def timelines(rows: list[tuple[float, float, float]]) -> Timelines:
    """One request per (ttft, queue, prefill) ms, a second apart, each
    100 tokens in and out; a queue of UNKNOWN is one the engine did not say."""
    t = Timelines(scenarios=["chat"])
    for i, (ttft, queue, prefill) in enumerate(rows):
        values = {
            "start_s": float(i),
            "ttft_ms": ttft,
            "e2e_ms": ttft + 500.0,
            "tpot_ms": 5.0,
            "input_tokens": 100.0,
            "cached_tokens": UNKNOWN,
            "output_tokens": 100.0,
            "conversation": float(i),
            "turn": 0.0,
            "queue_ms": queue,
            "prefill_ms": prefill,
        }
        t.scenario.append(0)
        t.user.append(i)
        for name in COLUMNS:
            t.columns[name].append(values[name])
        t.flags["ok"].append(True)
        t.flags["warmup"].append(False)
        t.flags["cut_off"].append(False)
    return t


FAST = [(100.0, 10.0, 80.0)] * 8  # 10 ms outside


def split_findings(slow: list[tuple[float, float, float]], limit: float = 500.0) -> list:
    found = timeline_findings(timelines(FAST + slow), {"chat": {"ttft_ms": limit}})
    return [f for f in found if "taken apart" in f.text]


def test_a_miss_mostly_in_the_queue_names_queueing() -> None:
    # 4 x 900 ms TTFT: 700 queue, 150 prefill, 50 outside
    (finding,) = split_findings([(900.0, 700.0, 150.0)] * 4)
    assert finding.cause == "queueing"
    assert finding.evidence["requests_over"] == 4
    assert finding.evidence["queue_share"] == pytest.approx(700 / 900, abs=1e-3)
    assert finding.evidence["outside_ms_p50"] == 50.0
    assert finding.share["ttft_ms"] > 0  # ranked by the timelines' share where they name it


def test_a_miss_mostly_in_prefill_names_prefill() -> None:
    (finding,) = split_findings([(900.0, 50.0, 800.0)] * 4)
    assert finding.cause == "prefill-bound"
    assert finding.evidence["prefill_share"] == pytest.approx(800 / 900, abs=1e-3)


def test_a_miss_mostly_outside_the_engine_names_the_network_or_gateway() -> None:
    (finding,) = split_findings([(900.0, 20.0, 80.0)] * 4)
    assert finding.cause == "outside the engine"
    assert "gateway" in finding.text
    assert finding.evidence["outside_share"] == pytest.approx(800 / 900, abs=1e-3)


def test_without_a_queue_time_the_finding_says_its_queue_is_outside() -> None:
    (finding,) = split_findings([(900.0, UNKNOWN, 100.0)] * 4)
    assert finding.cause == "outside the engine"
    assert finding.evidence["queue_reported"] is False
    assert "reports no queue time" in finding.text


def test_no_part_most_of_the_miss_names_nothing() -> None:
    # 900 = 300 queue + 300 prefill + 300 outside
    assert split_findings([(900.0, 300.0, 300.0)] * 4) == []


def test_no_miss_or_no_engine_timings_name_nothing() -> None:
    assert split_findings([(450.0, 400.0, 40.0)] * 4) == []
    assert split_findings([(900.0, UNKNOWN, UNKNOWN)] * 4) == []


def test_the_engines_own_queue_joins_the_fitted_queueing_finding() -> None:
    # TTFT rising with the requests in flight: 12 requests sent 0.1 s apart
    # that overlap more and more, their TTFT spent in the queue
    rows = [(200.0 + 200 * i, 150.0 + 200 * i, 40.0) for i in range(12)]
    t = timelines(rows)
    for i in range(12):
        t.columns["start_s"][i] = 0.1 * i
        t.columns["e2e_ms"][i] = 3000.0
    found = timeline_findings(t, {"chat": {"ttft_ms": 1000.0}})
    queueing = [f for f in found if f.cause == "queueing"]
    assert len(queueing) == 1 and "taken apart" in queueing[0].text
    assert "ms_per_request_in_flight" in queueing[0].evidence  # the fit's own numbers stay
    assert queueing[0].evidence["queue_share"] > 0.5  # and the engine's


def test_timelines_saved_before_the_split_read_back_without_it() -> None:
    saved = timelines(FAST).encode()
    assert saved["prefill_ms"] == [80.0] * 8
    del saved["queue_ms"], saved["prefill_ms"]
    older = Timelines.decode(saved)
    assert list(older.columns["queue_ms"]) == list(older.columns["prefill_ms"]) == [UNKNOWN] * 8
