"""An OTLP/HTTP receiver on 127.0.0.1: takes what an OpenTelemetry collector's
``otlphttp`` receiver takes (protobuf POSTs to /v1/metrics and /v1/traces),
decodes each with the protocol's own definitions (``opentelemetry-proto``) and
answers as the collector does."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from httpserving import serving
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

SIGNALS = {
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
}


class Received:
    def __init__(self) -> None:
        self.url = ""
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.refused: list[str] = []  # requests that were not OTLP protobuf
        self.lock = threading.Lock()

    def last_metrics(self) -> dict[str, Metric]:
        """The metrics of the last export, by name."""
        request = self.metrics[-1]
        return {
            m.name: m
            for rm in request.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }

    def spans(self) -> list[Span]:
        return [
            span
            for request in self.traces
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]


@contextmanager
def otlp_receiver() -> Iterator[Received]:
    """Receive until the block ends."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            kinds = SIGNALS.get(self.path)
            if kinds is None or self.headers.get("Content-Type") != "application/x-protobuf":
                received.refused.append(f"{self.path} {self.headers.get('Content-Type')}")
                self.send_response(404 if kinds is None else 415)
                self.end_headers()
                return
            request = kinds[0].FromString(body)
            with received.lock:
                target = received.metrics if self.path == "/v1/metrics" else received.traces
                target.append(request)
            answer = kinds[1]().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        received.url = f"http://127.0.0.1:{port}"
        yield received
