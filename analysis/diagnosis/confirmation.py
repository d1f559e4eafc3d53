"""What the engine's own metrics say about a cause the client's data found.

The client infers a cause from timing; an engine that exports its queue,
batch, KV usage and preemptions (vLLM, SGLang, TGI, llama.cpp with
``--metrics``: canonical names in ``slogate.analysis.engine_side.server_metrics``) can
confirm it or speak against it. Each rule reads the scrapes taken during the
run and answers ``agree``, ``disagree`` or ``absent`` (the engine does not
export what the rule reads, or was not scraped), with the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

AGREE, DISAGREE, ABSENT = "agree", "disagree", "absent"
ENGINE_SOURCE = "engine"
# A queue the engine reports: at least one request waiting in this many scrapes.
MIN_QUEUED_SCRAPES = 2
KV_NEAR_FULL = 0.9
# A batch that changes size: its largest at least this many times its smallest.
BATCH_SWING = 1.5

Answer = tuple[str, str]


def series(samples: Sequence[dict[str, Any]], name: str) -> list[float]:
    """One canonical series over the run's engine scrapes, in scrape order."""
    return [
        float(s["series"][name])
        for s in samples
        if s.get("source") == ENGINE_SOURCE and name in (s.get("series") or {})
    ]


def rise(values: list[float]) -> float | None:
    """A counter's growth over the run; None when it was not exported."""
    return values[-1] - values[0] if len(values) >= 2 else None


def queue_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    waiting, running = series(samples, "waiting"), series(samples, "running")
    if not waiting:
        return ABSENT, "the engine exports no waiting-queue gauge"
    queued = sum(w >= 1 for w in waiting)
    ran = f", up to {max(running):g} running" if running else ""
    text = (
        f"engine waiting queue: up to {max(waiting):g} waiting, non-empty in {queued} of "
        f"{len(waiting)} scrapes{ran}"
    )
    return (AGREE if queued >= MIN_QUEUED_SCRAPES else DISAGREE), text


def ceiling_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    state, text = queue_answer(samples)
    running, usage = series(samples, "running"), series(samples, "kv_cache_usage")
    if running:
        top = max(running)
        text += f"; running at its maximum {top:g} in {sum(x == top for x in running)} scrapes"
    if usage:
        text += f"; KV cache usage peaked at {100 * max(usage):.0f}%"
    return state, text


def preemption_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    grown = rise(series(samples, "preemptions_total"))
    usage = series(samples, "kv_cache_usage")
    full = f"; KV cache usage peaked at {100 * max(usage):.0f}%" if usage else ""
    if grown is None:
        if usage and max(usage) >= KV_NEAR_FULL:
            return AGREE, f"the engine exports no preemption counter{full}"
        return ABSENT, f"the engine exports no preemption counter{full}"
    return (AGREE if grown > 0 else DISAGREE), f"engine preemptions: {grown:g}{full}"


def prompt_time(samples: Sequence[dict[str, Any]]) -> str:
    """The engine's own prompt time per 1k prompt tokens it computed over the
    run, to read beside the client's fitted ms per 1k tokens; '' when it
    exports no prompt-time counter (llama.cpp does) or computed no prompt."""
    seconds = rise(series(samples, "prompt_seconds_total"))
    tokens = rise(series(samples, "prompt_tokens_total"))
    if seconds is None or not tokens:
        return ""
    return (
        f"; engine prompt time: {1e6 * seconds / tokens:.0f} ms per 1k prompt tokens "
        f"computed ({tokens:g} tokens in {seconds:.1f} s, summed over requests)"
    )


def interference_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    """Prefill stalls need other streams in the batch and no preemptions (which
    stall streams too)."""
    running = series(samples, "running")
    grown = rise(series(samples, "preemptions_total"))
    if grown:
        return DISAGREE, f"the engine preempted {grown:g} requests: those stall streams too"
    if not running:
        return ABSENT, "the engine exports no running-batch gauge"
    text = f"engine running batch: up to {max(running):g} requests decoded together"
    return (AGREE if max(running) >= 2 else DISAGREE), text + prompt_time(samples)


def prefill_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    """TTFT that is prefill, not queue: the engine's queue mostly empty."""
    waiting = series(samples, "waiting")
    if not waiting:
        return ABSENT, "the engine exports no waiting-queue gauge" + prompt_time(samples)
    queued = sum(w >= 1 for w in waiting)
    text = f"engine waiting queue non-empty in {queued} of {len(waiting)} scrapes"
    return (AGREE if queued < len(waiting) / 2 else DISAGREE), text + prompt_time(samples)


def batch_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    running = [x for x in series(samples, "running") if x > 0]
    if not running:
        return ABSENT, "the engine exports no running-batch gauge"
    text = f"engine running batch between {min(running):g} and {max(running):g}"
    return (AGREE if max(running) >= BATCH_SWING * min(running) else DISAGREE), text


def cache_answer(samples: Sequence[dict[str, Any]]) -> Answer:
    hits = rise(series(samples, "prefix_cache_hits_total"))
    queries = rise(series(samples, "prefix_cache_queries_total"))
    if hits is None or not queries:
        return ABSENT, "the engine exports no prefix-cache counters"
    ratio = hits / queries
    text = f"engine prefix cache: {100 * ratio:.0f}% of {queries:g} prompt tokens were hits"
    return (AGREE if ratio > 0 else DISAGREE), text


RULES: dict[str, Callable[[Sequence[dict[str, Any]]], Answer]] = {
    "prefill interference": interference_answer,
    "prefill-bound": prefill_answer,
    "queueing": queue_answer,
    "saturation": queue_answer,
    "concurrency ceiling": ceiling_answer,
    "preemption": preemption_answer,
    "KV cache full": preemption_answer,
    "decode-bound": batch_answer,
    "cache effect": cache_answer,
}


def confirm(cause: str, samples: Sequence[dict[str, Any]]) -> Answer | None:
    """(agree|disagree|absent, the numbers), or None for a cause no rule reads."""
    rule = RULES.get(cause)
    if rule is None:
        return None
    if not any(s.get("source") == ENGINE_SOURCE for s in samples):
        return ABSENT, "the engine's metrics were not scraped"
    return rule(samples)
