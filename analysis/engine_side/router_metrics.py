"""What a router says of its replicas: requests it sent to each, in flight, queued, failed.

A router's ``/metrics`` labels its series by replica, so its view of the
deployment's balance can be set beside the client's (each reply's served-by
header). Each router spells them its own way, and renames them between
releases (tests/data/router_metrics/ has each project's text, and the source
it was taken from):

- slogate's simulated router (``slogate engine --replicas``):
  ``slogate_router_requests_total{replica, reason}`` (requests sent, by why),
  ``slogate_router_requests_in_flight{replica}`` and
  ``slogate_router_errors_total{replica}`` (server errors, 5xx);
- SGLang's router, the SGLang Model Gateway: ``smg_worker_requests_active{worker}``
  and the circuit breaker's ``smg_worker_cb_outcomes_total{worker, outcome="failure"}``
  (no per-worker count of requests sent); its releases before the ``smg_``
  names (sgl-router): ``sgl_router_processed_requests_total{worker}``,
  ``sgl_router_running_requests{worker}`` and
  ``sgl_router_cb_outcomes_total{worker, outcome}``; the worker named by its URL;
- vLLM's production-stack router (``vllm_router``): gauges labelled
  ``server``: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``
  and ``vllm:current_qps`` (no counter of requests sent);
- llm-d's Endpoint Picker (EPP): the scheduling attempts that picked each
  endpoint, ``llm_d_router_epp_scheduler_attempts_total{status="success",
  endpoint_name}``, and the queue it sees on each,
  ``llm_d_router_epp_per_endpoint_queue_size{model_server_endpoint}``;
  llm-d 0.10 and 0.11 spell them ``llm_d_epp_*``, and the Gateway API
  Inference Extension's names, which the EPP still exports beside them, are
  ``inference_extension_scheduler_attempts_total{pod_name}`` and
  ``inference_pool_per_pod_queue_size{model_server_pod}``;
- NVIDIA Dynamo's frontend, with its KV router: the load it tracks on each
  worker, ``dynamo_frontend_worker_active_decode_blocks{worker_id, dp_rank,
  worker_type}`` (KV blocks of the requests decoding there) and
  ``dynamo_frontend_worker_active_prefill_tokens`` (prompt tokens waiting
  for or in prefill), summed over a worker's data-parallel ranks; it counts
  no requests per worker.

A router that exports one series under two names (the EPP's and the Model
Gateway's old and new ones, side by side during a deprecation) is read once:
for each replica and canonical series, the name listed first in
:data:`ROUTER_SERIES` that the text has wins, never their sum.

Series of a replica are keyed by canonical names: ``dispatched_total``,
``errors_total`` (counters), ``in_flight``, ``waiting``, ``qps``,
``active_decode_blocks``, ``active_prefill_tokens`` (gauges).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from slogate.analysis.engine_side.server_metrics import MetricsParseError

ROUTER_COUNTERS = ("dispatched_total", "errors_total")
ROUTER_GAUGES = ("in_flight", "waiting", "qps", "active_decode_blocks", "active_prefill_tokens")


@dataclass(frozen=True)
class RouterSeries:
    """One sample name of a router, the label naming the replica, the
    canonical series it adds to, and the labels a sample must carry to count."""

    name: str
    replica_label: str
    canonical: str
    only: tuple[tuple[str, str], ...] = ()


SUCCESS = (("status", "success"),)
FAILURE = (("outcome", "failure"),)

# Newest name first: of two names for one series, the first present is read.
ROUTER_SERIES = (
    RouterSeries("slogate_router_requests_total", "replica", "dispatched_total"),
    RouterSeries("slogate_router_requests_in_flight", "replica", "in_flight"),
    RouterSeries("slogate_router_errors_total", "replica", "errors_total"),
    RouterSeries("smg_worker_requests_active", "worker", "in_flight"),
    RouterSeries("smg_worker_cb_outcomes_total", "worker", "errors_total", FAILURE),
    RouterSeries("sgl_router_processed_requests_total", "worker", "dispatched_total"),
    RouterSeries("sgl_router_running_requests", "worker", "in_flight"),
    RouterSeries("sgl_router_cb_outcomes_total", "worker", "errors_total", FAILURE),
    RouterSeries("vllm:num_requests_running", "server", "in_flight"),
    RouterSeries("vllm:num_requests_waiting", "server", "waiting"),
    RouterSeries("vllm:current_qps", "server", "qps"),
    RouterSeries(
        "llm_d_router_epp_scheduler_attempts_total", "endpoint_name", "dispatched_total", SUCCESS
    ),
    RouterSeries(
        "llm_d_epp_scheduler_attempts_total", "endpoint_name", "dispatched_total", SUCCESS
    ),
    RouterSeries(
        "inference_extension_scheduler_attempts_total", "pod_name", "dispatched_total", SUCCESS
    ),
    RouterSeries("llm_d_router_epp_per_endpoint_queue_size", "model_server_endpoint", "waiting"),
    RouterSeries("llm_d_epp_per_endpoint_queue_size", "model_server_endpoint", "waiting"),
    RouterSeries("inference_pool_per_pod_queue_size", "model_server_pod", "waiting"),
    RouterSeries(
        "dynamo_frontend_worker_active_decode_blocks", "worker_id", "active_decode_blocks"
    ),
    RouterSeries(
        "dynamo_frontend_worker_active_prefill_tokens", "worker_id", "active_prefill_tokens"
    ),
)


def router_routes(text: str) -> dict[str, dict[str, float]]:
    """Each replica's canonical series from a router's metrics text, summed
    over the other labels (a counter's reasons, models); replicas the router
    names in none of the known series are absent, and so is a sample whose
    replica label is empty (the EPP's failed attempts). MetricsParseError for
    text that is not Prometheus format."""
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
    ranked = {series.name: (rank, series) for rank, series in enumerate(ROUTER_SERIES)}
    found: dict[tuple[str, str], tuple[int, float]] = {}  # (replica, canonical): (rank, sum)
    for name, labels, value in samples:
        hit = ranked.get(name)
        if hit is None:
            continue
        rank, series = hit
        replica = labels.get(series.replica_label)
        if not replica or any(labels.get(k) != v for k, v in series.only):
            continue
        key = (replica, series.canonical)
        held = found.get(key)
        if held is None or rank < held[0]:
            found[key] = (rank, value)
        elif rank == held[0]:
            found[key] = (rank, held[1] + value)
    routes: dict[str, dict[str, float]] = {}
    for (replica, canonical), (_, value) in found.items():
        routes.setdefault(replica, {})[canonical] = value
    return routes
