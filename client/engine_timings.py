"""The engine's own timing of a request, read from its reply: queue, prefill, prompt tokens.

Two shapes exist (docs/engines.md, "Per-request timings"): llama.cpp's
``timings`` object on its last chunk (``prompt_ms``: the prompt's processing
until the first token was sampled, ``prompt_n``: the prompt tokens it
computed, ``cache_n`` being those it reused; no queue time), which the
simulated engine sends too with its queue as ``queue_ms``; and vLLM's
``metrics`` object on the usage chunk when it runs with
``--enable-per-request-metrics`` (``queue_time_ms``: scheduled less queued,
``time_to_first_token_ms``: first token less scheduled, i.e. the prefill).

A field that is not a finite number at or above 0 counts as unsaid: a
diagnostic the engine got wrong never fails the request it rode on.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class EngineTimings(NamedTuple):
    """What the engine said of one request; None where it said nothing."""

    queue_ms: float | None
    prefill_ms: float | None
    prompt_tokens: int | None


def _ms(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _count(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if type(value) is int and value >= 0 else None


def engine_timings(chunk: dict[str, Any]) -> EngineTimings | None:
    """The timings a chunk's JSON object carries (llama.cpp's or vLLM's), or
    None when it carries no prefill time."""
    timings = chunk.get("timings")
    if type(timings) is dict:
        found = EngineTimings(
            _ms(timings, "queue_ms"), _ms(timings, "prompt_ms"), _count(timings, "prompt_n")
        )
    else:
        metrics = chunk.get("metrics")
        if type(metrics) is not dict:
            return None
        found = EngineTimings(
            _ms(metrics, "queue_time_ms"), _ms(metrics, "time_to_first_token_ms"), None
        )
    return found if found.prefill_ms is not None else None
