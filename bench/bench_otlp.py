"""What ``--otlp-endpoint`` and ``--otlp-traces`` cost a load process.

A span is built when its request is recorded, in the same gap between
open-loop instants, and exported later a batch at a time: so the figures that
matter are a span's cost beside a request's recording, one export's stretch
of the loop (what ``SPANS_PER_EXPORT`` bounds, against the SDK batch
processor's 512), the memory a held span takes, and building the run's
metrics. Spans go to a receiver on loopback (tests/support/otlpreceiver.py).

    .venv/bin/python bench/bench_otlp.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord
from slogate.locustfiles.otlp_export import SPANS_PER_EXPORT, MetricsPush, SpanPush

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from otlpreceiver import otlp_receiver

BATCH_PROCESSOR_MAX = 512  # the SDK BatchSpanProcessor's default export batch
TOKENS = 100


def streamed(rng: np.random.Generator) -> RequestRecord:
    """A finished 100-token request with a TTFT around 200 ms."""
    start = time.perf_counter_ns()
    record = RequestRecord("chat", start, output_tokens=TOKENS, input_tokens=500)
    first = start + int(rng.lognormal(np.log(2e8), 0.4))
    record.chunk_ns = [first + k * 20_000_000 for k in range(TOKENS)]
    record.chunk_chars = [4] * TOKENS
    record.end_ns = record.chunk_ns[-1] + 1000
    record.finish_reason = "stop"
    record.trace_id, record.span_id = f"{start:032x}", f"{start:016x}"[-16:]
    return record


def per_request_us(work: list[RequestRecord], step: Callable[[RequestRecord], object]) -> float:
    start = time.perf_counter_ns()
    for record in work:
        step(record)
    return (time.perf_counter_ns() - start) / len(work) / 1000


def encode_ms(spans: list[ReadableSpan], n: int) -> float:
    start = time.perf_counter_ns()
    encode_spans(spans[:n]).SerializeToString()
    return (time.perf_counter_ns() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    n = parser.parse_args().requests
    rng = np.random.default_rng(1)
    records = [streamed(rng) for _ in range(n)]
    recorder = Recorder()
    record_us = per_request_us(records, lambda r: recorder.record(r, wall_s=time.time()))
    with otlp_receiver() as received:
        spans = SpanPush(received.url, "bench", "model")
        span_us = per_request_us(records, lambda r: spans.add(r, False))
        held = list(spans.held.held)
        spans.close()
        measured = SpanPush(received.url, "bench", "model")
        tracemalloc.start()
        per_request_us(records, lambda r: measured.add(r, False))
        held_kb = tracemalloc.get_traced_memory()[0] / n / 1024
        tracemalloc.stop()
        measured.close()
        push = MetricsPush(received.url, "bench")
        start = time.perf_counter_ns()
        data = push.metrics({"chat": recorder.buckets[("chat", "all")]}, {}, time.time() - 60)
        metrics_ms = (time.perf_counter_ns() - start) / 1e6
        push.last(data)
    assert len(received.spans()) == 2 * n, "every span reached the receiver"
    print(f"recording a request          {record_us:8.0f} us")
    print(f"building its span            {span_us:8.0f} us")
    print(f"a held span                  {held_kb:8.1f} KB")
    for batch in (SPANS_PER_EXPORT, BATCH_PROCESSOR_MAX):
        print(f"encoding {batch:>3} spans (one export) {encode_ms(held, batch):6.1f} ms")
    print(f"the run's metrics ({n} requests) {metrics_ms:5.1f} ms")


if __name__ == "__main__":
    main()
