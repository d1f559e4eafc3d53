"""Hand-built runs for the SLO, summary, compare and report tests.

Histograms are filled directly with known samples (no load, no server), so a
test knows the true distribution behind every percentile it checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.histograms import HIGHEST_US, HistogramSet, record_many
from slogate.analysis.measurement.recorder import Bucket, Counters
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.verdict.generator import ProcessHealth

MS = 1_000_000


def request(
    ttft_ms: float,
    itl_ms: float = 20.0,
    tokens: int = 32,
    input_tokens: int | None = 512,
    scenario: str = "chat",
) -> RequestRecord:
    """A successful streamed request: ``tokens`` chunks of one token, the first
    ``ttft_ms`` after the start, then one every ``itl_ms``."""
    start = 1_000 * MS
    first = start + int(ttft_ms * MS)
    chunks = [first + int(i * itl_ms * MS) for i in range(tokens)]
    return RequestRecord(
        scenario=scenario,
        start_ns=start,
        end_ns=chunks[-1] + MS,
        chunk_ns=chunks,
        chunk_chars=[4] * tokens,
        output_tokens=tokens,
        input_tokens=input_tokens,
        finish_reason="length",
    )


def read_together(record: RequestRecord, pairs: int) -> RequestRecord:
    """The record as a late reader sees it: ``pairs`` times, a chunk that arrived
    one ITL before the next is stamped with the next one's instant."""
    for i in range(1, 2 * pairs, 2):
        record.chunk_ns[i] = record.chunk_ns[i + 1]
    return record


HOSTILE = '<script>alert("x")</script> \' " & ' + "A" * 3000


def record_all_us(histograms: HistogramSet, name: str, values_us: Sequence[float]) -> None:
    """Record every value as ``record_us`` would, in one vectorized call (the
    batch path is checked equal to one value at a time in test_metrics.py): a
    realistic run records about 200,000 samples."""
    us = np.clip(np.rint(np.asarray(values_us, dtype=np.float64)), 0, HIGHEST_US).astype(np.int64)
    if len(us):
        record_many(histograms.histogram(name), us, np.ones(len(us), dtype=np.int64))


def bucket(
    samples_ms: Mapping[str, Sequence[float]],
    *,
    ok: int | None = None,
    failed: Mapping[str, int] | None = None,
    good: int | None = None,
    output_tokens: int = 0,
    error_samples: Mapping[str, list[str]] | None = None,
) -> Bucket:
    """A bucket whose histograms hold ``samples_ms`` (milliseconds) exactly.
    ``ok`` defaults to the number of e2e (else ttft) samples."""
    histograms = HistogramSet()
    for name, values in samples_ms.items():
        record_all_us(histograms, name, np.asarray(values, dtype=np.float64) * 1000)
    first = samples_ms.get("e2e", samples_ms.get("ttft", ()))
    counters = Counters(ok=len(first) if ok is None else ok, output_tokens=output_tokens)
    counters.good = counters.ok if good is None else good
    for kind, count in (failed or {}).items():
        counters.failed += count
        counters.errors[kind] += count
    counters.error_samples = {k: list(v) for k, v in (error_samples or {}).items()}
    return Bucket(histograms, counters)


def run_of(
    buckets: Mapping[str, Bucket],
    slo: Mapping[str, list[dict[str, Any]]] | None = None,
    **meta: Any,
) -> RunData:
    """A complete, healthy run of the given scenario buckets; ``meta`` overrides keys."""
    base: dict[str, Any] = {
        "run_id": "test-run",
        "started_at": "2026-01-02T03:04:05+00:00",
        "ended_at": "2026-01-02T03:05:05+00:00",
        "measured_s": 60.0,
        "complete": True,
        "host": "http://127.0.0.1:8000",
        "engine": {"owned_by": "vllm", "model": "test-model"},
        "tool_version": "0.1.0",
        "git_revision": "abc123",
        "window_s": 5.0,
        "generator": {"lag_p99_ms": 1.0, "max_lag_ms": 50.0, "cpu_warning": False},
        "scenarios": {
            name: {"source": f"{name}.yaml", "api": "chat", "slo": (slo or {}).get(name, [])}
            for name in buckets
        },
        "baseline": None,
    }
    base.update(meta)
    return RunData(meta=base, buckets={(name, "all"): b for name, b in buckets.items()})


def lognormal_ms(median: float, sigma: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), sigma, n)


def realistic_run(
    n: int = 4000,
    seed: int = 1,
    scale: float = 1.0,
    scenario: str = "chat",
    slos: list[dict[str, Any]] | None = None,
) -> RunData:
    """A one-scenario chat run with every histogram, two stages, a time series,
    server metrics and a few errors (one message hostile); ``scale`` multiplies
    every latency, to plant a regression; ``slos`` replace its three."""
    ttft = lognormal_ms(300, 0.5, n, seed) * scale
    itl = lognormal_ms(25, 0.3, n * 20, seed + 1) * scale
    tpot = lognormal_ms(26, 0.2, n, seed + 2) * scale
    e2e = ttft + tpot * 120
    samples = {
        "ttft": ttft,
        "itl": itl,
        "tpot": tpot,
        "e2e": e2e,
        "ttft_sched": ttft * 1.02,
        "e2e_sched": e2e * 1.01,
        "chunk_gap": itl * 1.1,
        "max_stall": tpot * 4,
        "ttft_turn_1": ttft[: n // 2],
        "ttft_turn_2": ttft[n // 2 :] * 1.3,
    }
    errors = {"http_5xx": 7, "timeout_stall": 2}
    chat = bucket(
        samples,
        failed=errors,
        good=int(n * 0.97),
        output_tokens=n * 120,
        error_samples={"http_5xx": [HOSTILE, "upstream overloaded"], "timeout_stall": ["stall"]},
    )
    tokens = chat.histograms
    rng = np.random.default_rng(seed + 3)
    inputs = rng.integers(800, 1200, n)
    record_all_us(tokens, "input_tokens", inputs)
    record_all_us(tokens, "intended_input_tokens", inputs - 2)
    tokens.record_us("output_tokens", 120, n)
    tokens.record_us("intended_output_tokens", 128, n)
    c = chat.counters
    c.input_tokens, c.intended_input_tokens = n * 1000, n * 998
    c.intended_output_tokens = n * 128
    c.count_methods.update(usage=n)
    c.chunk_token_methods.update(proportional=n)
    default_slos = [
        {"metric": "ttft_ms", "stat": "p99", "limit": 2000.0, "kind": "max"},
        {"metric": "itl_ms", "stat": "p95", "limit": 60.0, "kind": "max"},
        {"metric": "error_rate", "stat": "max", "limit": 0.01, "kind": "max"},
    ]
    run = run_of({scenario: chat}, slo={scenario: default_slos if slos is None else slos})
    for stage, part in (("warm", slice(0, n // 2)), ("hot", slice(n // 2, n))):
        run.buckets[(scenario, f"stage:{stage}")] = bucket(
            {k: v[part] for k, v in samples.items() if k in ("ttft", "itl", "tpot", "e2e")}
        )
    run.timeseries = [
        {
            "scenario": scenario,
            "t_s": 5.0 * i,
            "window_s": 5.0,
            "requests_ok": 60 + i % 7,
            "requests_failed": int(i == 5),
            "errors": {"http_5xx": 1} if i == 5 else {},
            "requests_per_s": 12.0,
            "output_tokens_per_s": 1440.0 + 10 * i,
            "input_tokens_per_s": 12000.0,
            "ttft_p50_ms": 300.0 + i,
            "ttft_p99_ms": 900.0 + 20 * (i % 4),
            "itl_p50_ms": 25.0,
            "itl_p99_ms": 48.0 + i % 3,
            "tpot_p50_ms": 26.0,
            "tpot_p99_ms": 40.0,
            "e2e_p50_ms": 3400.0,
            "e2e_p99_ms": 5200.0,
            "users": 16,
            "in_flight": 14 + i % 3,
        }
        for i in range(12)
    ]
    run.server_metrics = [
        {
            "t_s": 5.0 * i,
            "source": "engine",
            "series": {
                "running": 14 + i % 3,
                "kv_cache_usage": 0.4 + 0.02 * i,
                "generation_tokens_total": 7200.0 * i,
            },
        }
        for i in range(12)
    ]
    return run


def chat_run(scale: float, seed: int, n: int = 20000, ok: int | None = None) -> RunData:
    """TTFT and ITL from the same lognormal, every latency multiplied by ``scale``."""
    samples = {
        "ttft": lognormal_ms(300, 0.5, n, seed) * scale,
        "itl": lognormal_ms(25, 0.3, n, seed + 1) * scale,
        "e2e": lognormal_ms(3000, 0.4, n, seed + 2) * scale,
    }
    return run_of({"chat": bucket(samples, ok=ok, output_tokens=100 * n)})


def with_stalls(run: RunData, stall_ms: float, held: int = 200) -> RunData:
    """The run as if its load loop had been held ``stall_ms`` for ``held`` of
    10000 turns (2% by default)."""
    health = ProcessHealth(pid=1)
    health.stall.record_value(100, 10000 - held)  # 0.1 ms late: a prompt loop
    health.stall.record_value(int(stall_ms * 1000), held)
    run.meta["generator"] = {"health": {"local": health.to_dict()}}
    return run
