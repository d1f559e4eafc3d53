"""``--otlp-endpoint``: the run's metrics pushed over OTLP/HTTP while it runs,
and with ``--otlp-traces`` one span per request.

Where each is sent from decides that nothing counts twice: the metrics from
the process that judges the run (the local runner, or the master, which has
merged every worker's histograms), every ``PUSH_INTERVAL_S`` and once more
after the verdict; the spans from the load process that sent the request
(each request is recorded by one process), a few at a time in the gaps
between its open-loop instants.
An endpoint that cannot be reached never fails the run: one warning, the
results folder holds the same numbers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.records import RequestRecord
from slogate.locustfiles.worker_clocks import wall
from slogate.reports.otlp import Rates, metrics_data, run_metrics

log = logging.getLogger("slogate")

PUSH_INTERVAL_S = 5.0
SPANS_INTERVAL_S = 1.0
EXPORT_TIMEOUT_S = 5.0
METRICS_PATH = "/v1/metrics"
TRACES_PATH = "/v1/traces"
SERVICE = "slogate"
# one export's encoding: 1.7 to 6.1 ms here, a housekeeping stretch (bench/bench_otlp.py)
SPANS_PER_EXPORT = 32
MAX_HELD_SPANS = 10_000  # 3.2 KB each (measured); more: the collector is too slow
MAX_ATTRIBUTE_CHARS = 256  # server text (a model, a reply's id) in an attribute
# The exporters log every failed export; slogate warns once per endpoint instead.
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp", "opentelemetry.sdk")


def signal_url(endpoint: str, path: str) -> str:
    """OTLP/HTTP's URL of one signal under the collector's base URL, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read."""
    return endpoint.rstrip("/") + path


def run_resource(run_id: str) -> Resource:
    return Resource.create({"service.name": SERVICE, "service.instance.id": run_id})


def quiet_exporters() -> None:
    for name in EXPORTER_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


class WarnOnce:
    """Warn once that exports to ``url`` fail; the run goes on."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.warned = False

    def failed(self, what: str) -> None:
        if not self.warned:
            self.warned = True
            log.warning(
                "slogate: --otlp-endpoint: %s not accepted at %s (the run goes on; "
                "its results folder has every number)",
                what,
                self.url,
            )


class MetricsPush:
    """The judging process's metrics exporter: cumulative data from the run's start."""

    def __init__(self, endpoint: str, run_id: str) -> None:
        quiet_exporters()
        url = signal_url(endpoint, METRICS_PATH)
        self.exporter = OTLPMetricExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)
        self.resource = run_resource(run_id)
        self.warning = WarnOnce(url)
        self.pushes = 0
        self.lock = threading.Lock()  # gevent's, in a load process
        self.closed = False

    def metrics(
        self,
        buckets: Mapping[str, Bucket],
        rates: Mapping[str, Rates],
        start_s: float,
        verdicts: Mapping[str, str] | None = None,
    ) -> MetricsData:
        """The run's metrics so far (``verdicts`` once judged)."""
        metrics = run_metrics(buckets, rates, int(start_s * 1e9), int(wall() * 1e9), verdicts)
        return metrics_data(metrics, self.resource)

    def send(self, data: MetricsData) -> bool:
        """False (and a warning, the first time) when the collector did not
        take them, or after the last push."""
        with self.lock:
            return not self.closed and self._export(data)

    def last(self, data: MetricsData) -> bool:
        """The final push; no live push leaves after it (one may be on its
        way: this one waits for it)."""
        with self.lock:
            self.closed = True
            sent = self._export(data)
            self.exporter.shutdown()
            return sent

    def _export(self, data: MetricsData) -> bool:
        result = self.exporter.export(data)
        self.pushes += 1
        if result is not MetricExportResult.SUCCESS:
            self.warning.failed("metrics")
            return False
        return True


class HeldSpans(SpanProcessor):
    """Ended spans held until the load process has a gap between its
    open-loop instants to send them in (:meth:`send_some`, under its
    clearance), a few at a time. The SDK's batch processor would encode up
    to 512 spans in one stretch of the loop: 60 to 83 ms here, the
    generator's lag. After an export fails the rest are dropped: a collector
    that cannot be reached costs each export its timeout."""

    def __init__(self, exporter: SpanExporter, warning: WarnOnce) -> None:
        self.exporter = exporter
        self.warning = warning
        self.held: list[ReadableSpan] = []
        self.dropped = 0
        self.sending = threading.Lock()  # a flush waits for the export on its way

    def on_end(self, span: ReadableSpan) -> None:
        if len(self.held) >= MAX_HELD_SPANS:
            self.warning.failed(f"spans (more than {MAX_HELD_SPANS} waiting)")
        if self.warning.warned:
            self.dropped += 1
        else:
            self.held.append(span)

    def send_some(self) -> bool:
        """Export the oldest ``SPANS_PER_EXPORT``; whether any are left."""
        with self.sending:
            batch = self.held[:SPANS_PER_EXPORT]
            del self.held[:SPANS_PER_EXPORT]
            if batch and self.exporter.export(batch) is not SpanExportResult.SUCCESS:
                self.warning.failed("spans")
                self.dropped += len(self.held) + len(batch)
                self.held.clear()
            return bool(self.held)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        while self.send_some():
            pass
        return not self.warning.warned

    def shutdown(self) -> None:
        self.force_flush()
        self.exporter.shutdown()


class SpanPush:
    """One load process's spans: a tracer whose ids are each request's own
    (the ids it sent the server, so both sides' spans join one trace), its
    ended spans held for :meth:`send_some`."""

    def __init__(self, endpoint: str, run_id: str, model: str) -> None:
        quiet_exporters()
        url = signal_url(endpoint, TRACES_PATH)
        self.ids = GivenIds()
        self.provider = TracerProvider(resource=run_resource(run_id), id_generator=self.ids)
        exporter = OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)
        self.held = HeldSpans(exporter, WarnOnce(url))
        self.provider.add_span_processor(self.held)
        self.tracer = self.provider.get_tracer(SERVICE)
        self.model = model[:MAX_ATTRIBUTE_CHARS]
        self.root = Context()  # no ambient parent: each request's span is its own
        self.kind = SpanKind.CLIENT

    def send_some(self) -> bool:
        """Send a few held spans (one export); whether more are held."""
        return self.held.send_some()

    def add(self, record: RequestRecord, warmup: bool) -> None:
        """``record``'s span, its instants moved from the monotonic clock to the wall's."""
        to_wall = int(wall() * 1e9) - time.perf_counter_ns()
        self.ids.next(record.trace_id, record.span_id)
        span = self.tracer.start_span(
            f"request {record.scenario}",
            context=self.root,
            kind=self.kind,
            attributes=span_attributes(record, self.model, warmup),
            start_time=record.start_ns + to_wall,
        )
        if record.chunk_ns:
            span.add_event("first_token", timestamp=record.chunk_ns[0] + to_wall)
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error.value))
        span.end(end_time=max(record.end_ns, record.start_ns) + to_wall)

    def close(self) -> None:
        """Send every held span, then shut the provider down: the load has
        stopped (at its end, or on a signal), no gap is needed."""
        self.provider.force_flush()
        self.provider.shutdown()


def span_attributes(record: RequestRecord, model: str, warmup: bool) -> dict[str, Any]:
    """What a span says of its request, in the GenAI conventions' names where they have one."""
    given = {
        "slogate.scenario": record.scenario,
        "slogate.request_id": record.request_id,
        "slogate.warmup": warmup,
        "slogate.cancelled": record.cancelled or None,
        "gen_ai.request.model": model,
        "gen_ai.response.id": record.engine_request_id,
        "gen_ai.usage.input_tokens": record.input_tokens,
        "gen_ai.usage.output_tokens": record.output_tokens,
        "error.type": record.error.value if record.error is not None else None,
        "http.response.status_code": record.http_status,
    }
    return {
        key: value[:MAX_ATTRIBUTE_CHARS] if isinstance(value, str) else value
        for key, value in given.items()
        if value is not None
    }


class GivenIds(IdGenerator):
    """The SDK's id generator, made to hand out a request's own trace and span
    ids (hex, as the record holds them) and random ones where it has none."""

    def __init__(self) -> None:
        self.random = RandomIdGenerator()
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def next(self, trace_id: str | None, span_id: str | None) -> None:
        self.trace_id = int(trace_id, 16) if trace_id else None
        self.span_id = int(span_id, 16) if span_id else None

    def generate_trace_id(self) -> int:
        return self.trace_id or self.random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self.span_id or self.random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return True
