"""What a router says of its replicas: requests it sent to each, in flight, queued, failed.

A router's ``/metrics`` labels its series by replica, so its view of the
deployment's balance can be set beside the client's (each reply's served-by
header). Each router spells them its own way:

- slogate's simulated router (``slogate engine --replicas``):
  ``slogate_router_requests_total{replica, reason}`` (requests sent, by why),
  ``slogate_router_requests_in_flight{replica}`` and
  ``slogate_router_errors_total{replica}`` (server errors, 5xx);
- SGLang's router (sgl-router, the SGLang Model Gateway):
  ``sgl_router_processed_requests_total{worker}``,
  ``sgl_router_running_requests{worker}`` and the circuit breaker's
  ``sgl_router_cb_outcomes_total{worker, outcome="failure"}``, the worker
  named by its URL;
- vLLM's production-stack router (``vllm_router``): gauges labelled
  ``server``: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``
  and ``vllm:current_qps`` (no counter of requests sent);
- llm-d's inference scheduler (the Endpoint Picker, EPP, of the Gateway API
  Inference Extension): ``inference_pool_per_pod_queue_size{model_server_pod}``,
  the queue it sees on each pod (its request counters are per model, not per pod).

Series of a replica are keyed by canonical names: ``dispatched_total``,
``errors_total`` (counters), ``in_flight``, ``waiting``, ``qps`` (gauges).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from slogate.analysis.server_metrics import MetricsParseError

ROUTER_COUNTERS = ("dispatched_total", "errors_total")
ROUTER_GAUGES = ("in_flight", "waiting", "qps")


@dataclass(frozen=True)
class RouterSeries:
    """One sample name of a router, the label naming the replica, the
    canonical series it adds to, and the labels a sample must carry to count."""

    name: str
    replica_label: str
    canonical: str
    only: tuple[tuple[str, str], ...] = ()


ROUTER_SERIES = (
    RouterSeries("slogate_router_requests_total", "replica", "dispatched_total"),
    RouterSeries("slogate_router_requests_in_flight", "replica", "in_flight"),
    RouterSeries("slogate_router_errors_total", "replica", "errors_total"),
    RouterSeries("sgl_router_processed_requests_total", "worker", "dispatched_total"),
    RouterSeries("sgl_router_running_requests", "worker", "in_flight"),
    RouterSeries(
        "sgl_router_cb_outcomes_total", "worker", "errors_total", (("outcome", "failure"),)
    ),
    RouterSeries("vllm:num_requests_running", "server", "in_flight"),
    RouterSeries("vllm:num_requests_waiting", "server", "waiting"),
    RouterSeries("vllm:current_qps", "server", "qps"),
    RouterSeries("inference_pool_per_pod_queue_size", "model_server_pod", "waiting"),
)


def router_routes(text: str) -> dict[str, dict[str, float]]:
    """Each replica's canonical series from a router's metrics text, summed
    over the other labels (a counter's reasons, models); replicas the router
    names in none of the known series are absent. MetricsParseError for text
    that is not Prometheus format."""
    try:
        samples = [
            (s.name, s.labels, float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsParseError(f"not Prometheus text format: {exc}") from exc
    return routes_of(samples)


def routes_of(
    samples: Iterable[tuple[str, Mapping[str, str], float]],
) -> dict[str, dict[str, float]]:
    by_name = {series.name: series for series in ROUTER_SERIES}
    routes: dict[str, dict[str, float]] = {}
    for name, labels, value in samples:
        series = by_name.get(name)
        if series is None or series.replica_label not in labels:
            continue
        if any(labels.get(k) != v for k, v in series.only):
            continue
        route = routes.setdefault(labels[series.replica_label], {})
        route[series.canonical] = route.get(series.canonical, 0.0) + value
    return routes
