"""Engine metrics texts, in each engine's real exposition format, mapped to canonical names.

vLLM and SGLang export through Python's prometheus_client, so their texts are
produced here by prometheus_client itself with the documented metric names; TGI
(Rust metrics-exporter-prometheus), llama.cpp and the DCGM exporter write their
own text, reproduced as they print it.
"""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slogate.analysis.engine_side.server_metrics import (
    DCGM,
    MetricsParseError,
    bucket_bounds,
    histogram_delta,
    snapshot,
)
from slogate.analysis.measurement.speculation import acceptance_rate, mean_accepted_length


def vllm_text(kv_name: str = "vllm:kv_cache_usage_perc", prefix: str = "vllm:prefix_cache") -> str:
    """What a vLLM V1 server with two data-parallel engines exposes (names from its docs)."""
    r = CollectorRegistry()
    labels = ["engine", "model_name"]
    running = Gauge("vllm:num_requests_running", "running", labels, registry=r)
    waiting = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=r)
    kv = Gauge(kv_name, "KV-cache usage. 1 means 100 percent usage.", labels, registry=r)
    prompt = Counter("vllm:prompt_tokens", "prefill tokens", labels, registry=r)
    generation = Counter("vllm:generation_tokens", "generation tokens", labels, registry=r)
    preempt = Counter("vllm:num_preemptions", "preemptions", labels, registry=r)
    hits = Counter(f"{prefix}_hits", "prefix cache hits", labels, registry=r)
    queries = Counter(f"{prefix}_queries", "prefix cache queries", labels, registry=r)
    ttft = Histogram("vllm:time_to_first_token_seconds", "ttft", labels, registry=r)
    for engine, (run, wait, usage, p, g, pre, h, q) in {
        "0": (3, 1, 0.5, 1000, 200, 2, 300, 900),
        "1": (2, 0, 0.25, 500, 100, 1, 100, 400),
    }.items():
        lv = (engine, "meta-llama/Llama-3.1-8B-Instruct")
        running.labels(*lv).set(run)
        waiting.labels(*lv).set(wait)
        kv.labels(*lv).set(usage)
        prompt.labels(*lv).inc(p)
        generation.labels(*lv).inc(g)
        preempt.labels(*lv).inc(pre)
        hits.labels(*lv).inc(h)
        queries.labels(*lv).inc(q)
        ttft.labels(*lv).observe(0.05)
    return generate_latest(r).decode()


def test_vllm_series_sum_over_engines_and_average_kv_usage() -> None:
    snap = snapshot(vllm_text())
    assert snap.engine == "vllm"
    assert snap.series == {
        "running": 5.0,
        "waiting": 1.0,
        "kv_cache_usage": 0.375,
        "prompt_tokens_total": 1500.0,
        "generation_tokens_total": 300.0,
        "preemptions_total": 3.0,
        "prefix_cache_hits_total": 400.0,
        "prefix_cache_queries_total": 1300.0,
    }
    assert snap.counters == {
        "vllm:prompt_tokens_total": 1500.0,
        "vllm:generation_tokens_total": 300.0,
        "vllm:num_preemptions_total": 3.0,
        "vllm:prefix_cache_hits_total": 400.0,
        "vllm:prefix_cache_queries_total": 1300.0,
    }


def test_vllm_names_before_v1_are_still_read() -> None:
    snap = snapshot(vllm_text("vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache"))
    assert snap.series["kv_cache_usage"] == 0.375
    assert snap.series["prefix_cache_hits_total"] == 400.0
    assert snap.series["prefix_cache_queries_total"] == 1300.0


def sglang_text() -> str:
    """SGLang with --enable-metrics (names from docs.sglang.io Production Metrics)."""
    r = CollectorRegistry()
    labels = ["model_name"]
    lv = ("meta-llama/Llama-3.1-8B-Instruct",)
    Counter("sglang:prompt_tokens", "prefill", labels, registry=r).labels(*lv).inc(8128902)
    Counter("sglang:generation_tokens", "gen", labels, registry=r).labels(*lv).inc(7557572)
    Gauge("sglang:token_usage", "usage", labels, registry=r).labels(*lv).set(0.28)
    Gauge("sglang:cache_hit_rate", "hit rate", labels, registry=r).labels(*lv).set(0.0075)
    Gauge("sglang:num_running_reqs", "running", labels, registry=r).labels(*lv).set(12)
    Gauge("sglang:num_queue_reqs", "queued", labels, registry=r).labels(*lv).set(4)
    Gauge("sglang:num_retracted_reqs", "last batch", labels, registry=r).labels(*lv).set(1)
    Counter("sglang:num_retracted_requests", "retracted", labels, registry=r).labels(*lv).inc(48)
    Counter("sglang:cached_tokens", "cached", labels, registry=r).labels(*lv).inc(61000)
    return generate_latest(r).decode()


def test_sglang_retractions_come_from_the_counter_not_the_batch_gauge() -> None:
    snap = snapshot(sglang_text())
    assert snap.engine == "sglang"
    assert snap.series == {
        "running": 12.0,
        "waiting": 4.0,
        "kv_cache_usage": 0.28,
        "prompt_tokens_total": 8128902.0,
        "generation_tokens_total": 7557572.0,
        "preemptions_total": 48.0,
        "prefix_cache_hits_total": 61000.0,
    }


# As TGI's Rust exporter writes it: counters without _total, histograms with buckets.
TGI_TEXT = """\
# TYPE tgi_request_count counter
tgi_request_count 42
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 7
# TYPE tgi_queue_size gauge
tgi_queue_size 3
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 9000
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 10
tgi_request_input_length_bucket{le="1000"} 40
tgi_request_input_length_bucket{le="+Inf"} 42
tgi_request_input_length_sum 21000
tgi_request_input_length_count 42
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="100"} 30
tgi_request_generated_tokens_bucket{le="+Inf"} 42
tgi_request_generated_tokens_sum 5400
tgi_request_generated_tokens_count 42
"""


def test_tgi_token_totals_are_histogram_sums_and_kv_usage_is_absent() -> None:
    snap = snapshot(TGI_TEXT)
    assert snap.engine == "tgi"
    assert snap.series == {
        "running": 7.0,
        "waiting": 3.0,
        "prompt_tokens_total": 21000.0,
        "generation_tokens_total": 5400.0,
    }
    assert "kv_cache_usage" not in snap.series
    assert snap.counters == {"tgi_request_count_total": 42.0}


# Verbatim from llama-server 11434.0.0 started with --metrics (after a few requests).
LLAMACPP_TEXT = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 320
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 80
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.68359
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 88
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 30
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 39
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 468.117
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 2
"""


def test_llamacpp_prefix_cache_queries_add_cached_and_computed_prompt_tokens() -> None:
    snap = snapshot(LLAMACPP_TEXT)
    assert snap.engine == "llamacpp"
    assert snap.series == {
        "running": 4.0,
        "waiting": 2.0,
        "prompt_tokens_total": 320.0,
        "prompt_seconds_total": 0.68359,
        "generation_tokens_total": 88.0,
        "prefix_cache_hits_total": 80.0,
        "prefix_cache_queries_total": 400.0,
    }
    assert snap.counters["llamacpp:n_decode_total"] == 30.0


def test_llamacpp_older_builds_report_kv_usage() -> None:
    older = LLAMACPP_TEXT + (
        "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.63\n"
    )
    assert snapshot(older).series["kv_cache_usage"] == pytest.approx(0.63)


# NIM for LLMs 1.x at /v1/metrics: unprefixed names.
NIM_TEXT = """\
# TYPE num_requests_running gauge
num_requests_running{model_name="meta/llama-3.1-8b-instruct"} 6
# TYPE num_requests_waiting gauge
num_requests_waiting{model_name="meta/llama-3.1-8b-instruct"} 0
# TYPE gpu_cache_usage_perc gauge
gpu_cache_usage_perc{model_name="meta/llama-3.1-8b-instruct"} 0.42
# TYPE prompt_tokens_total counter
prompt_tokens_total{model_name="meta/llama-3.1-8b-instruct"} 12000
# TYPE generation_tokens_total counter
generation_tokens_total{model_name="meta/llama-3.1-8b-instruct"} 3400
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
"""


def test_nim_is_recognised_by_its_unprefixed_names() -> None:
    snap = snapshot(NIM_TEXT)
    assert snap.engine == "nim"
    assert snap.series == {
        "running": 6.0,
        "waiting": 0.0,
        "kv_cache_usage": 0.42,
        "prompt_tokens_total": 12000.0,
        "generation_tokens_total": 3400.0,
    }
    assert "process_cpu_seconds_total" not in snap.counters


DCGM_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-604ac76c",device="nvidia0",modelName="NVIDIA H100"} 90
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-2c1e9a10",device="nvidia1",modelName="NVIDIA H100"} 70
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-604ac76c",device="nvidia0",modelName="NVIDIA H100"} 70000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-2c1e9a10",device="nvidia1",modelName="NVIDIA H100"} 10000
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-604ac76c",device="nvidia0",modelName="NVIDIA H100"} 1980
"""


def test_dcgm_utilisation_is_a_mean_fraction_and_memory_a_sum_in_bytes() -> None:
    snap = snapshot(DCGM_TEXT, DCGM)
    assert snap.engine == "dcgm"
    assert snap.series == {"gpu_utilization": 0.8, "gpu_memory_used_bytes": 80000 * 1024 * 1024}


@pytest.mark.parametrize(
    ("text", "engine"),
    [
        (vllm_text(), "vllm"),
        (sglang_text(), "sglang"),
        (TGI_TEXT, "tgi"),
        (LLAMACPP_TEXT, "llamacpp"),
        (NIM_TEXT, "nim"),
        (DCGM_TEXT, "dcgm"),
        ("# TYPE go_goroutines gauge\ngo_goroutines 12\n", "unknown"),
    ],
    ids=["vllm", "sglang", "tgi", "llamacpp", "nim", "dcgm", "unknown"],  # the text has timestamps
)
def test_engine_is_detected_from_metric_names(text: str, engine: str) -> None:
    assert snapshot(text).engine == engine


def test_nan_gauges_are_left_out_rather_than_charted() -> None:
    text = LLAMACPP_TEXT.replace("llamacpp:requests_deferred 2", "llamacpp:requests_deferred NaN")
    assert "waiting" not in snapshot(text).series


def test_unknown_exporter_maps_to_nothing() -> None:
    snap = snapshot("# TYPE go_goroutines gauge\ngo_goroutines 12\n")
    assert (snap.engine, snap.series, snap.counters) == ("unknown", {}, {})


def test_text_that_is_not_prometheus_is_a_clear_error() -> None:
    with pytest.raises(MetricsParseError, match="not Prometheus text format"):
        snapshot("<html><body>502 Bad Gateway</body></html>")


VLLM_TTFT_BOUNDS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1)


def ttft_scrapes(itl_name: str) -> tuple[str, str]:
    """Two scrapes of a vLLM with two data-parallel engines: 10 first tokens
    (and 3 token gaps) before the first, 30 more (and 6) by the second."""
    r = CollectorRegistry()
    labels = ["engine", "model_name"]
    ttft = Histogram(
        "vllm:time_to_first_token_seconds", "ttft", labels, registry=r, buckets=VLLM_TTFT_BOUNDS
    )
    itl = Histogram(itl_name, "gaps", labels, registry=r, buckets=(0.01, 0.025))
    model = "meta-llama/Llama-3.1-8B-Instruct"
    for value in (0.005,) * 10:
        ttft.labels("0", model).observe(value)
    for value in (0.009, 0.009, 0.011):
        itl.labels("1", model).observe(value)
    before = generate_latest(r).decode()
    for engine, value in [("0", 0.03)] * 20 + [("1", 0.05)] * 9 + [("1", 0.5)]:
        ttft.labels(engine, model).observe(value)
    for value in (0.009,) * 6:
        itl.labels("0", model).observe(value)
    return before, generate_latest(r).decode()


@pytest.mark.parametrize(
    "itl_name", ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]
)
def test_latency_histograms_differ_between_scrapes(itl_name: str) -> None:
    before, after = (snapshot(text) for text in ttft_scrapes(itl_name))
    assert before.histograms["ttft_seconds"].count == 10
    ttft = histogram_delta(before.histograms["ttft_seconds"], after.histograms["ttft_seconds"])
    assert ttft is not None
    assert ttft.count == 30
    assert ttft.sum == pytest.approx(20 * 0.03 + 9 * 0.05 + 0.5)
    assert dict(ttft.buckets)[0.04] == 20  # both engines' buckets added
    assert bucket_bounds(ttft, 0.5) == (0.02, 0.04)
    assert bucket_bounds(ttft, 0.9) == (0.04, 0.06)
    assert bucket_bounds(ttft, 0.99) == (0.1, math.inf)  # past the last bound: unknown
    itl = histogram_delta(before.histograms["itl_seconds"], after.histograms["itl_seconds"])
    assert itl is not None and itl.count == 6
    assert type(ttft).from_dict(ttft.as_dict()) == ttft  # as saved in run.json


def test_an_engine_restart_between_scrapes_gives_no_difference() -> None:
    before, after = (snapshot(t) for t in ttft_scrapes("vllm:inter_token_latency_seconds"))
    assert (
        histogram_delta(after.histograms["ttft_seconds"], before.histograms["ttft_seconds"]) is None
    )


def test_engines_without_latency_histograms_have_none() -> None:
    assert snapshot(sglang_text()).histograms == {}
    assert snapshot(vllm_text()).histograms["ttft_seconds"].count == 2


def test_phase_times_and_kv_transfers_are_read_where_engines_export_them() -> None:
    vllm = (
        "# TYPE vllm:request_prefill_time_seconds histogram\n"
        'vllm:request_prefill_time_seconds_bucket{le="0.5"} 3\n'
        'vllm:request_prefill_time_seconds_bucket{le="+Inf"} 4\n'
        "vllm:request_prefill_time_seconds_sum 1.2\n"
        "vllm:request_prefill_time_seconds_count 4\n"
        "# TYPE vllm:nixl_xfer_time_seconds histogram\n"
        'vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 2\n'
        "vllm:nixl_xfer_time_seconds_sum 0.25\n"
        "vllm:nixl_xfer_time_seconds_count 2\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running 1\n"
    )
    snap = snapshot(vllm)
    assert snap.histograms["prefill_seconds"].count == 4
    assert snap.histograms["prefill_seconds"].sum == pytest.approx(1.2)
    assert snap.histograms["kv_transfer_seconds"].sum == pytest.approx(0.25)
    assert "decode_seconds" not in snap.histograms  # not exported: absent, never 0
    sglang = (
        "# TYPE sglang:kv_transfer_latency_ms gauge\n"
        'sglang:kv_transfer_latency_ms{model_name="m"} 12.5\n'
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m"} 2\n'
    )
    assert snapshot(sglang).series["kv_transfer_ms"] == 12.5


# llama-server (this machine's build, -md with --spec-type draft-simple) after
# two 100-token requests; its per-position counters are labelled as vLLM's
LLAMACPP_METRICS = """\
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 200
# HELP llamacpp:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 158
# HELP llamacpp:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 150
# HELP llamacpp:spec_decode_num_drafts_total Number of drafts.
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 40
# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted per position.
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 40
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 39
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 37
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="3"} 34
"""


def test_llamacpp_counters_map_to_the_same_names() -> None:
    snap = snapshot(LLAMACPP_METRICS)
    assert snap.engine == "llamacpp"
    s = snap.series
    assert (s["spec_drafts_total"], s["spec_draft_tokens_total"]) == (40, 158)
    assert s["spec_accepted_tokens_total"] == 150
    assert [s[f"spec_accepted_per_position_total:{i}"] for i in range(4)] == [40, 39, 37, 34]
    assert mean_accepted_length(150, 40) == pytest.approx(4.75)
    assert acceptance_rate(150, 158) == pytest.approx(0.949367, abs=1e-6)
