"""``--otlp-endpoint``'s exporters: metrics and spans sent by the SDK's OTLP
exporter to a receiver on loopback and decoded there with the protocol's own
definitions; an endpoint that cannot be reached warned of once; a bad URL
refused as the command parses."""

from __future__ import annotations

import time

import pytest
from loadruns import cli, unreachable_host
from otlpreceiver import otlp_receiver

from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.locustfiles.otlp_export import SPANS_PER_EXPORT, MetricsPush, SpanPush
from slogate.reports.otlp import Rates


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
        assert push.last(data) is True
        assert push.send(data) is False  # nothing after the last push
    assert len(received.metrics) == 2
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


def test_spans_are_held_for_a_gap_and_leave_a_few_at_a_time() -> None:
    now = time.perf_counter_ns()
    with otlp_receiver() as received:
        spans = SpanPush(received.url, "run-1", "m")
        for i in range(SPANS_PER_EXPORT + 8):
            spans.add(finished(now + i), warmup=False)
        assert received.spans() == []  # nothing left while the requests were recorded
        assert spans.send_some() is True
        assert len(received.spans()) == SPANS_PER_EXPORT
        assert spans.send_some() is False
        spans.add(finished(now), warmup=False)
        spans.close()  # the rest, at the load's end
    assert len(received.spans()) == SPANS_PER_EXPORT + 9
    assert len(received.traces) == 3


@pytest.mark.slow  # the exporter retries for seconds before it gives up
def test_an_endpoint_that_cannot_be_reached_is_warned_of_once(caplog) -> None:
    with unreachable_host() as url:
        push = MetricsPush(url, "run-1")
        data = push.metrics({"chat": bucket_with([1000], {})}, {}, time.time())
        assert push.send(data) is False
        assert push.send(data) is False
        spans = SpanPush(url, "run-1", "m")
        for _ in range(SPANS_PER_EXPORT + 1):
            spans.add(finished(time.perf_counter_ns()), warmup=False)
        assert spans.send_some() is False  # failed: the rest dropped, not tried again
        spans.add(finished(time.perf_counter_ns()), warmup=False)
        spans.close()
    assert spans.held.dropped == SPANS_PER_EXPORT + 2
    warnings = [r.getMessage() for r in caplog.records if "--otlp-endpoint" in r.getMessage()]
    assert len(warnings) == 2
    assert f"metrics not accepted at {url}/v1/metrics" in warnings[0]
    assert f"spans not accepted at {url}/v1/traces" in warnings[1]


@pytest.mark.parametrize("text", ["127.0.0.1:4318", "ftp://x", "http://", "grpc://h:4317"])
def test_an_endpoint_that_is_not_an_http_url_stops_the_run_as_it_parses(text: str) -> None:
    done = cli("run", "chat", "--otlp-endpoint", text)
    assert done.returncode == 2
    assert "argument --otlp-endpoint: expected an http(s)://HOST[:PORT] URL" in done.stderr
    assert repr(text) in done.stderr
