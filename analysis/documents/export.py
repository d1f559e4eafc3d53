"""One request as a line of JSON: what ``--save-requests`` writes, so a user can
find the requests behind a tail percentile and see what each one did.

The line holds the record's observations (chunk arrival offsets, token counts,
error, stage, turn) and the latencies :mod:`slogate.analysis.measurement.request_metrics` derives
from them, in milliseconds like summary.json. Instants are given as offsets from
the request's start: ``perf_counter_ns`` values mean nothing outside the process
that took them. ``start_s`` places the request on the wall clock. The ids
(``request_id``, ``trace_id``, ``span_id``, ``engine_request_id``) find the
request in the engine's logs and a tracing backend.
"""

from __future__ import annotations

from typing import Any

from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import RequestMetrics
from slogate.scenarios.metrics import (
    E2E,
    E2E_SCHED,
    GENERATOR_LAG,
    MAX_STALL,
    TPOT,
    TTFT,
    TTFT_SCHED,
)

NS_PER_MS = 1e6


def ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 6)


def request_line(
    record: RequestRecord,
    metrics: RequestMetrics,
    end_wall_s: float,
    stage: str | None,
    warmup: bool,
) -> dict[str, Any]:
    """The JSON object of one finished request (successful or not). ``end_wall_s``
    is the wall-clock instant the request ended; the start is derived from it."""
    return {
        "scenario": record.scenario,
        "request_id": record.request_id,
        "trace_id": record.trace_id,
        "span_id": record.span_id,
        "engine_request_id": record.engine_request_id,
        "conversation": record.conversation,
        "turn": record.turn,
        "user": record.user,
        "endpoint": record.endpoint,
        "served_by": record.served_by,
        "stage": stage,
        "warmup": warmup,
        "start_s": round(end_wall_s - (record.end_ns - record.start_ns) / 1e9, 6),
        "ok": record.ok,
        "cancelled": record.cancelled,
        "error": None if record.error is None else record.error.value,
        "error_message": record.error_message or None,
        "http_status": record.http_status,
        "finish_reason": record.finish_reason,
        "constrained": record.constrained,
        "schema_first": record.schema_first if record.constrained else None,
        "schema_error": record.schema_error,
        TTFT.key: ms(metrics.ttft_ns),
        TPOT.key: ms(metrics.tpot_ns),
        E2E.key: ms(metrics.e2e_ns),
        MAX_STALL.key: ms(metrics.max_stall_ns),
        TTFT_SCHED.key: ms(metrics.ttft_sched_ns),
        E2E_SCHED.key: ms(metrics.e2e_sched_ns),
        GENERATOR_LAG.key: ms(metrics.lag_ns),
        "lag_parts_ms": None
        if metrics.lag_parts is None
        else {name.removeprefix("lag_"): ms(v) for name, v in metrics.lag_parts.items()},
        "ttft_split_ms": None
        if metrics.ttft_split is None
        else {
            "outside": ms(metrics.ttft_split.outside_ns),
            "queue": ms(metrics.ttft_split.queue_ns),
            "prefill": ms(metrics.ttft_split.prefill_ns),
        },
        "engine_prompt_tokens": record.engine_prompt_tokens,
        "input_tokens": record.input_tokens,
        "cached_tokens": record.cached_tokens,
        "draft_tokens": record.draft_tokens,
        "accepted_tokens": record.accepted_tokens,
        "intended_input_tokens": record.intended_input_tokens,
        "output_tokens": metrics.output_tokens,
        "intended_output_tokens": record.intended_output_tokens,
        "count_method": metrics.count_method.value,
        "chunk_token_method": metrics.chunk_token_method.value,
        "chunk_ms": [ms(t - record.start_ns) for t in record.chunk_ns],
        "chunk_tokens": list(record.chunk_tokens),
    }
