"""The run as OpenTelemetry data (``--otlp-endpoint``): HDR histograms as
exponential histograms that keep every count, metrics and spans sent by the
SDK's OTLP exporter to a receiver on loopback and decoded there with the
protocol's own definitions."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from loadruns import unreachable_host
from otlpreceiver import otlp_receiver

from slogate.analysis.measurement.histograms import HistogramSet
from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.locustfiles.argtypes import http_url
from slogate.locustfiles.otlp_export import MetricsPush, SpanPush
from slogate.reports.otlp import MAX_BUCKETS, Rates, exponential_point

US = 1_000_000


def histogram_of(values_us: list[int]):
    hs = HistogramSet()
    for value in values_us:
        hs.record_us("ttft", value)
    return hs.histogram("ttft")


def bucket_bounds(scale: int, offset: int, index: int) -> tuple[float, float]:
    base = 2.0 ** (2.0**-scale)
    return base ** (offset + index), base ** (offset + index + 1)


@pytest.mark.parametrize(
    "values_us",
    [
        [1500, 1500, 2300, 80_000, 80_100, 2_000_000],  # 1.5 ms to 2 s
        [0, 1, 3, 3_600_000_000],  # the whole range: a coarse scale, zeros apart
        [250_000] * 7,  # one value
    ],
)
def test_every_hdr_sample_lands_in_the_exponential_bucket_that_holds_it(values_us) -> None:
    point = exponential_point(histogram_of(values_us), {"k": "v"}, 1, 2)
    assert point.count == len(values_us)
    assert point.zero_count == values_us.count(0)
    assert sum(point.positive.bucket_counts) + point.zero_count == len(values_us)
    assert len(point.positive.bucket_counts) <= MAX_BUCKETS
    # each positive value, in order, is counted in a bucket whose bounds hold
    # it, to HDR's 3 digits (a value is its HDR bucket's middle)
    bounds = [
        bucket_bounds(point.scale, point.positive.offset, i)
        for i, count in enumerate(point.positive.bucket_counts)
        for _ in range(count)
    ]
    for value, (lower, upper) in zip(sorted(v for v in values_us if v), bounds, strict=True):
        assert lower * (1 - 1e-3) < value / US <= upper * (1 + 1e-3)
    assert point.sum == pytest.approx(sum(values_us) / US, rel=1e-3)
    assert point.min == pytest.approx(min(values_us) / US, rel=1e-3, abs=1e-6)
    assert point.max == pytest.approx(max(values_us) / US, rel=1e-3)


def test_a_run_of_usual_spread_gets_buckets_a_few_percent_wide() -> None:
    rng = np.random.default_rng(3)
    values = [int(v) for v in rng.lognormal(math.log(200_000), 0.5, 2000)]  # TTFT around 200 ms
    point = exponential_point(histogram_of(values), {}, 1, 2)
    assert point.scale >= 4  # a bucket at most 2**(1/16) - 1 = 4.4% wide
    assert point.count == 2000


def bucket_with(ttfts_us: list[int], failed: dict[str, int]) -> Bucket:
    bucket = Bucket()
    for value in ttfts_us:
        bucket.histograms.record_us("ttft", value)
        bucket.histograms.record_us("e2e", value * 3)
        bucket.histograms.record_us("itl", 20_000, count=10)
        bucket.counters.ok += 1
    for kind, count in failed.items():
        bucket.counters.failed += count
        bucket.counters.errors[kind] += count
    return bucket


def test_metrics_reach_a_receiver_with_their_counts_and_the_verdict() -> None:
    buckets = {"chat": bucket_with([100_000, 120_000, 900_000], {"http_5xx": 2}), "rag": Bucket()}
    with otlp_receiver() as received:
        push = MetricsPush(received.url, "run-1")
        data = push.metrics(buckets, {"chat": Rates(1.5, 80.0)}, time.time() - 10, {"": "fail"})
        assert push.send(data) is True
        push.close()
    assert received.refused == []
    got = received.last_metrics()
    ttft = got["slogate.ttft"].exponential_histogram
    [point] = ttft.data_points
    assert ttft.aggregation_temporality == 2  # cumulative
    assert point.count == 3 and sum(point.positive.bucket_counts) == 3
    assert {a.key: a.value.string_value for a in point.attributes} == {"slogate.scenario": "chat"}
    assert got["slogate.ttft"].unit == "s"
    assert got["slogate.itl"].exponential_histogram.data_points[0].count == 30
    requests = {
        dict((a.key, a.value.string_value) for a in p.attributes)["slogate.outcome"]: p.as_int
        for p in got["slogate.requests"].sum.data_points
        if p.attributes[0].value.string_value == "chat"
    }
    assert requests == {"ok": 3, "failed": 2}
    assert got["slogate.requests"].sum.is_monotonic
    [errors] = got["slogate.errors"].sum.data_points
    assert errors.as_int == 2 and errors.attributes[1].value.string_value == "http_5xx"
    [rate] = got["slogate.throughput.requests"].gauge.data_points
    assert rate.as_double == 1.5
    [verdict] = got["slogate.verdict"].gauge.data_points
    assert [(a.key, a.value.string_value) for a in verdict.attributes] == [
        ("slogate.verdict", "fail")
    ]
    resource = {
        a.key: a.value.string_value
        for a in received.metrics[0].resource_metrics[0].resource.attributes
    }
    assert resource["service.name"] == "slogate" and resource["service.instance.id"] == "run-1"


def finished(start_ns: int, **fields) -> RequestRecord:
    record = RequestRecord("chat", start_ns, end_ns=start_ns + 300_000_000, **fields)
    record.chunk_ns = [start_ns + 100_000_000, start_ns + 200_000_000]
    return record


def test_spans_carry_the_ids_the_request_sent_and_its_instants() -> None:
    now = time.perf_counter_ns()
    with_ids = finished(
        now - 1_000_000_000,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id="00f067aa0ba902b7",
        request_id="req-1",
        engine_request_id="chatcmpl-9",
        output_tokens=12,
    )
    failed = finished(now).fail(ErrorKind.HTTP_5XX, "boom", now + 5_000_000)
    with otlp_receiver() as received:
        spans = SpanPush(received.url, "run-1", "m" * 1000)
        wall_before = time.time_ns()
        spans.add(with_ids, warmup=False)
        spans.add(failed, warmup=True)
        spans.close()  # flushes the batch
    first, second = sorted(received.spans(), key=lambda s: s.start_time_unix_nano)
    assert first.trace_id.hex() == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert first.span_id.hex() == "00f067aa0ba902b7"
    assert first.parent_span_id == b""
    assert first.end_time_unix_nano - first.start_time_unix_nano == 300_000_000
    # on the wall clock: started a second before it was added
    assert abs(wall_before - 1_000_000_000 - first.start_time_unix_nano) < 50_000_000
    [event] = first.events
    assert event.name == "first_token"
    assert event.time_unix_nano - first.start_time_unix_nano == 100_000_000
    attributes = {a.key: a.value for a in first.attributes}
    assert attributes["slogate.request_id"].string_value == "req-1"
    assert attributes["gen_ai.response.id"].string_value == "chatcmpl-9"
    assert attributes["gen_ai.usage.output_tokens"].int_value == 12
    assert len(attributes["gen_ai.request.model"].string_value) == 256
    assert first.status.code == 0 and first.kind == 3  # unset, client
    # no ids recorded: random ones, and the failure as the span's status
    assert len(second.trace_id) == 16 and second.trace_id != first.trace_id
    assert second.status.code == 2 and second.status.message == "http_5xx"
    assert {a.key: a.value.bool_value for a in second.attributes}["slogate.warmup"] is True


@pytest.mark.slow  # the exporter retries for seconds before it gives up
def test_an_endpoint_that_cannot_be_reached_is_warned_of_once(caplog) -> None:
    with unreachable_host() as url:
        push = MetricsPush(url, "run-1")
        data = push.metrics({"chat": bucket_with([1000], {})}, {}, time.time())
        assert push.send(data) is False
        assert push.send(data) is False
    warnings = [r.getMessage() for r in caplog.records if "--otlp-endpoint" in r.getMessage()]
    assert len(warnings) == 1 and url in warnings[0]


@pytest.mark.parametrize("text", ["127.0.0.1:4318", "ftp://x", "http://", "grpc://h:4317"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="expected an http"):
        http_url(text)
