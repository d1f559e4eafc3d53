"""``--otlp-endpoint``: the run's metrics pushed over OTLP/HTTP while it runs,
and with ``--otlp-traces`` one span per request.

Where each is sent from decides that nothing counts twice: the metrics from
the process that judges the run (the local runner, or the master, which has
merged every worker's histograms), every ``PUSH_INTERVAL_S`` and once more
after the verdict; the spans from the load process that sent the request
(each request is recorded by one process), batched by the SDK's processor.
An endpoint that cannot be reached never fails the run: one warning, the
results folder holds the same numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.records import RequestRecord
from slogate.locustfiles.worker_clocks import wall
from slogate.reports.otlp import Rates, metrics_data, run_metrics

log = logging.getLogger("slogate")

PUSH_INTERVAL_S = 5.0
EXPORT_TIMEOUT_S = 5.0
METRICS_PATH = "/v1/metrics"
TRACES_PATH = "/v1/traces"
SERVICE = "slogate"
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


class Warning1:
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
        self.warning = Warning1(url)
        self.pushes = 0

    def metrics(
        self,
        buckets: Mapping[str, Bucket],
        rates: Mapping[str, Rates],
        start_s: float,
        verdicts: Mapping[str, str] | None = None,
    ) -> MetricsData:
        """The run's metrics so far (``verdicts`` once judged), built apart
        from :meth:`send`, which waits on the network."""
        metrics = run_metrics(buckets, rates, int(start_s * 1e9), int(wall() * 1e9), verdicts)
        return metrics_data(metrics, self.resource)

    def send(self, data: MetricsData) -> bool:
        """False (and a warning, the first time) when the collector did not take them."""
        result = self.exporter.export(data)
        self.pushes += 1
        if result is not MetricExportResult.SUCCESS:
            self.warning.failed("metrics")
            return False
        return True

    def close(self) -> None:
        self.exporter.shutdown()


class Warned(SpanExporter):
    """A span exporter that warns once when an export fails."""

    def __init__(self, exporter: SpanExporter, warning: Warning1) -> None:
        self.exporter = exporter
        self.warning = warning

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.warning.failed("spans")
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class SpanPush:
    """One load process's spans: a tracer whose ids are each request's own
    (the ids it sent the server, so both sides' spans join one trace), the
    SDK's batch processor sending them in the background."""

    def __init__(self, endpoint: str, run_id: str, model: str) -> None:
        quiet_exporters()
        url = signal_url(endpoint, TRACES_PATH)
        self.ids = GivenIds()
        self.provider = TracerProvider(resource=run_resource(run_id), id_generator=self.ids)
        exporter = OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)
        self.provider.add_span_processor(BatchSpanProcessor(Warned(exporter, Warning1(url))))
        self.tracer = self.provider.get_tracer(SERVICE)
        self.model = model[:MAX_ATTRIBUTE_CHARS]
        self.root = Context()  # no ambient parent: each request's span is its own
        self.kind = SpanKind.CLIENT

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
        """Send what is batched, then stop the processor (the run's end, or a signal's)."""
        self.provider.force_flush(int(EXPORT_TIMEOUT_S * 1000))
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
