"""Fixed windows of a run: throughput, headline percentiles, errors, load gauges."""

from __future__ import annotations

from typing import Any

from slogate.analysis.recorder import Bucket

WINDOW_PERCENTILES = {"p50": 50.0, "p99": 99.0}


def window_row(
    scenario: str, index: int, window_s: float, bucket: Bucket, gauges: dict[str, float]
) -> dict[str, Any]:
    """One row of the time series: rates over the window and its percentiles in ms.

    ``gauges`` are the load side's samples at the window's end (users, in flight).
    """
    c = bucket.counters
    row: dict[str, Any] = {
        "scenario": scenario,
        "t_s": index * window_s,
        "window_s": window_s,
        "requests_ok": c.ok,
        "requests_failed": c.failed,
        "errors": dict(c.errors),
        "requests_per_s": c.total / window_s,
        "output_tokens_per_s": c.output_tokens / window_s,
        "input_tokens_per_s": c.input_tokens / window_s,
    }
    for metric in ("ttft", "itl", "tpot", "e2e"):
        histogram = bucket.histograms.histogram(metric) if metric in bucket.histograms else None
        for key, p in WINDOW_PERCENTILES.items():
            value = None
            if histogram is not None and histogram.get_total_count():
                value = histogram.get_value_at_percentile(p) / 1000.0
            row[f"{metric}_{key}_ms"] = value
    row.update(gauges)
    return row
