"""A run's metrics as OpenTelemetry data: its latency histograms, counts, rates and
verdict as the OTel SDK's metric points (``--otlp-endpoint``, docs/reports.md).

The process that judges a run holds merged HDR histograms, not the values
behind them, and an OTel instrument takes values: recording them again would
cost a pass over every sample and give a second, coarser copy. So the metrics
are built here as the SDK's own data points (cumulative, from the run's
start) straight from the HDR buckets, and its OTLP exporter encodes and sends
them. Latencies become exponential histograms, as fine as 160 buckets allow
(OTel's default size): a simulated run's TTFT at scale 5, each bucket 2.2%
wide, where a 1-2-5 explicit bucket list is 100 to 150% wide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from hdrh.histogram import HdrHistogram
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from slogate.analysis.measurement.histograms import recorded
from slogate.analysis.measurement.recorder import Bucket
from slogate.scenarios.metrics import E2E, ITL, TTFT

# The run's metric names, each spelled here once: OTel name -> (HDR histogram, description).
LATENCIES = {
    "slogate.ttft": (TTFT.name, "Time to first token of the measured requests"),
    "slogate.itl": (ITL.name, "Inter-token latency, one sample per output token"),
    "slogate.e2e": (E2E.name, "End-to-end latency of the measured requests"),
}
REQUESTS = "slogate.requests"
ERRORS = "slogate.errors"
REQUEST_RATE = "slogate.throughput.requests"
TOKEN_RATE = "slogate.throughput.output_tokens"
VERDICT = "slogate.verdict"

SCENARIO = "slogate.scenario"
MAX_BUCKETS = 160  # the SDK's default exponential histogram size
MAX_SCALE = 20
US_PER_S = 1e6
SCOPE = InstrumentationScope("slogate")
CUMULATIVE = AggregationTemporality.CUMULATIVE


@dataclass(frozen=True, slots=True)
class Rates:
    """A scenario's throughput over its measured time so far (None: none measured)."""

    requests_per_s: float | None
    output_tokens_per_s: float | None


def bucket_indexes(values_s: np.ndarray, scale: int) -> np.ndarray:
    """OTel's exponential bucket of each positive value: index i holds
    (base**i, base**(i + 1)], base = 2**(2**-scale)."""
    return np.ceil(np.log2(values_s) * 2.0**scale).astype(np.int64) - 1


def widest_scale(values_s: np.ndarray) -> int:
    """The finest scale at which the values fit in ``MAX_BUCKETS`` buckets."""
    low, high = float(values_s.min()), float(values_s.max())
    for scale in range(MAX_SCALE, -11, -1):
        first, last = bucket_indexes(np.array([low, high]), scale)
        if last - first < MAX_BUCKETS:
            return scale
    return -10


def exponential_point(
    histogram: HdrHistogram, attributes: Mapping[str, str], start_ns: int, now_ns: int
) -> ExponentialHistogramDataPoint:
    """One HDR histogram (microseconds) as an exponential data point in
    seconds; each HDR bucket goes whole into the OTel bucket of its middle."""
    r = recorded(histogram)
    middles_s = (r.lowest + (r.highest - r.lowest + 1) // 2) / US_PER_S
    positive = middles_s > 0
    counts = r.counts[positive]
    scale, offset, bucket_counts = 0, 0, np.zeros(0, np.int64)
    if counts.size:
        scale = widest_scale(middles_s[positive])
        indexes = bucket_indexes(middles_s[positive], scale)
        offset = int(indexes.min())
        bucket_counts = np.bincount(indexes - offset, weights=counts).astype(np.int64)
    return ExponentialHistogramDataPoint(
        attributes=dict(attributes),
        start_time_unix_nano=start_ns,
        time_unix_nano=now_ns,
        count=r.total,
        sum=float(np.dot(middles_s, r.counts)),
        scale=scale,
        zero_count=int(r.counts[~positive].sum()),
        positive=Buckets(offset, [int(c) for c in bucket_counts]),
        negative=Buckets(0, []),
        flags=0,
        min=histogram.get_min_value() / US_PER_S,
        max=histogram.get_max_value() / US_PER_S,
    )


def _number(
    value: float, attributes: Mapping[str, str], start_ns: int, now_ns: int
) -> NumberDataPoint:
    return NumberDataPoint(dict(attributes), start_ns, now_ns, value)


def _counter(name: str, unit: str, doc: str, points: list[NumberDataPoint]) -> Metric:
    return Metric(name, doc, unit, Sum(points, CUMULATIVE, is_monotonic=True))


def run_metrics(
    buckets: Mapping[str, Bucket],
    rates: Mapping[str, Rates],
    start_ns: int,
    now_ns: int,
    verdicts: Mapping[str, str] | None = None,
) -> list[Metric]:
    """The measured run so far: each scenario's ``buckets`` (warm-up
    excluded) and ``rates``; ``verdicts`` at the end, by scenario, the run's
    own under ``""`` (a point with no scenario attribute)."""
    latencies: dict[str, list[ExponentialHistogramDataPoint]] = {name: [] for name in LATENCIES}
    requests, errors, request_rate, token_rate = [], [], [], []
    for scenario, bucket in sorted(buckets.items()):
        who = {SCENARIO: scenario}
        for name, (source, _) in LATENCIES.items():
            if source in bucket.histograms:
                histogram = bucket.histograms.histogram(source)
                if histogram.get_total_count():
                    latencies[name].append(exponential_point(histogram, who, start_ns, now_ns))
        c = bucket.counters
        for outcome, count in (("ok", c.ok), ("failed", c.failed)):
            requests.append(_number(count, {**who, "slogate.outcome": outcome}, start_ns, now_ns))
        for kind, count in sorted(c.errors.items()):
            errors.append(_number(count, {**who, "error.type": kind}, start_ns, now_ns))
        rate = rates.get(scenario)
        if rate is not None and rate.requests_per_s is not None:
            request_rate.append(_number(rate.requests_per_s, who, start_ns, now_ns))
        if rate is not None and rate.output_tokens_per_s is not None:
            token_rate.append(_number(rate.output_tokens_per_s, who, start_ns, now_ns))
    metrics = [
        Metric(name, LATENCIES[name][1], "s", ExponentialHistogram(points, CUMULATIVE))
        for name, points in latencies.items()
        if points
    ]
    metrics += [
        _counter(REQUESTS, "{request}", "Finished requests (ok + failed)", requests),
        _counter(ERRORS, "{request}", "Failed requests by kind of error", errors),
        Metric(REQUEST_RATE, "Successful requests per second", "{request}/s", Gauge(request_rate)),
        Metric(TOKEN_RATE, "Output tokens per second", "{token}/s", Gauge(token_rate)),
    ]
    if verdicts is not None:
        points = [
            _number(1, {SCENARIO: s, VERDICT: v} if s else {VERDICT: v}, start_ns, now_ns)
            for s, v in sorted(verdicts.items())
        ]
        metrics.append(
            Metric(VERDICT, "The verdict (pass, fail, inconclusive, invalid)", "1", Gauge(points))
        )
    return metrics


def metrics_data(metrics: list[Metric], resource: Resource) -> MetricsData:
    """The export's one resource and scope around ``metrics``."""
    scope = ScopeMetrics(SCOPE, metrics, schema_url="")
    return MetricsData([ResourceMetrics(resource, [scope], schema_url="")])
