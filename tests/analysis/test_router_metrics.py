"""Each router's own metrics text, as its project's source writes it
(tests/data/router_metrics/, each file naming the source and commit it was
taken from), read per replica by analysis/engine_side/router_metrics.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from slogate.analysis.engine_side.router_metrics import router_routes

DATA = Path(__file__).parents[1] / "data" / "router_metrics"

URL1, URL2 = "http://10.0.0.1:8000", "http://10.0.0.2:8000"
GATEWAY1, GATEWAY2 = "http://10.0.0.1:30000", "http://10.0.0.2:30000"


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (  # no per-worker count of requests sent; a failure outcome is an error
            "sglang-model-gateway.prom",
            {GATEWAY1: {"in_flight": 3.0, "errors_total": 2.0}, GATEWAY2: {"in_flight": 1.0}},
        ),
        (
            "sgl-router.prom",
            {
                URL1: {"dispatched_total": 40.0, "in_flight": 5.0, "errors_total": 2.0},
                URL2: {"dispatched_total": 2.0},
            },
        ),
        (  # vllm:avg_latency is not a route's series
            "vllm-production-stack.prom",
            {URL2: {"in_flight": 2.0, "waiting": 4.0, "qps": 1.5}},
        ),
        (  # a worker's data-parallel ranks summed; no count of requests per worker
            "dynamo-frontend.prom",
            {
                "123": {"active_decode_blocks": 50.0, "active_prefill_tokens": 100.0},
                "456": {"active_decode_blocks": 30.0, "active_prefill_tokens": 0.0},
            },
        ),
        (  # each series exported twice, read once; the failed attempt names no endpoint
            "llm-d-epp.prom",
            {
                "decode-0-rank-0": {"dispatched_total": 30.0, "waiting": 6.0},
                "decode-1-rank-0": {"dispatched_total": 12.0, "waiting": 0.0},
            },
        ),
    ],
)
def test_each_routers_own_text_is_read_per_replica(fixture: str, expected: dict) -> None:
    assert router_routes((DATA / fixture).read_text()) == expected


def test_a_series_exported_under_two_names_is_read_once_under_the_newer() -> None:
    """The EPP's deprecated names alone are read as the new ones were; with
    both, the newer wins (their values differ here on purpose: a sum or the
    older would show)."""
    text = (DATA / "llm-d-epp.prom").read_text()
    legacy = "\n".join(line for line in text.splitlines() if "llm_d_router_epp" not in line)
    assert router_routes(legacy) == router_routes(text)
    queue = "llm_d_router_epp_per_endpoint_queue_size"
    newer = [line.replace("} 6", "} 9") for line in text.splitlines() if line.startswith(queue)]
    for order in ([text.replace("} 6\n", "} 9\n", 1)], [legacy, f"# TYPE {queue} gauge", *newer]):
        assert router_routes("\n".join(order))["decode-0-rank-0"]["waiting"] == 9.0, order
