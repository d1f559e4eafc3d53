"""Fixed windows of a run: throughput, headline percentiles, errors, load gauges,
speculative acceptance where the replies say it; and each endpoint's and
replica's share of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.speculation import acceptance_rate
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT, TTFT_SCHED

WINDOW_PERCENTILES = {"p50": 50.0, "p99": 99.0}


def window_row(
    scenario: str, index: int, window_s: float, bucket: Bucket, gauges: Mapping[str, float]
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
        "spec_acceptance_rate": acceptance_rate(c.accepted_tokens, c.draft_tokens),
    }
    # open loop: TTFT from the schedule too, which keeps growing with a queue
    # held back at the in-flight cap while TTFT from the send stays flat
    scheduled = (TTFT_SCHED.name,) if TTFT_SCHED.name in bucket.histograms else ()
    for metric in (TTFT.name, ITL.name, TPOT.name, E2E.name, *scheduled):
        histogram = bucket.histograms.histogram(metric) if metric in bucket.histograms else None
        for key, p in WINDOW_PERCENTILES.items():
            value = None
            if histogram is not None and histogram.get_total_count():
                value = histogram.get_value_at_percentile(p) / 1000.0
            row[f"{metric}_{key}_ms"] = value
    row.update(gauges)
    return row


def apart_row(
    scenario: str, span: str, index: int, window_s: float, bucket: Bucket
) -> dict[str, Any]:
    """One endpoint's (or replica's) row of a window: ``span`` is the
    recorder's (``endpoint:NAME``, ``replica:NAME``), kept as the key
    ``endpoint`` or ``replica``. No gauges: users and in-flight requests are
    the load side's, not an endpoint's."""
    kind, _, name = span.partition(":")
    return {**window_row(scenario, index, window_s, bucket, {}), kind: name}


def apart_series(
    rows: Iterable[Mapping[str, Any]], scenario: str, kind: str
) -> dict[str, list[dict[str, Any]]]:
    """``scenario``'s rows of each endpoint (``kind`` ``endpoint``) or replica,
    by its name, in time order; each row without the keys its place already says."""
    series: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["t_s"]):
        name = row.get(kind)
        if row.get("scenario") == scenario and name is not None:
            rest = {k: v for k, v in row.items() if k not in ("scenario", kind)}
            series.setdefault(name, []).append(rest)
    return series
