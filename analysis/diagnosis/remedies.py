"""What to try for a diagnosed cause: the engine's setting, and the experiment.

A cause is only useful with the knob that addresses it, and knobs are named
differently per engine. Besides the prose a reader follows, :data:`REMEDIES`
names the settings a tune can vary (``slogate tune --from RUN_DIR``) and the
way to move each, so a program never parses the prose. The engine is the one
the run's scrapes recognised (``slogate.analysis.engine_side.server_metrics`` dialects),
else the one ``/v1/models`` named (its ``owned_by``); the simulated engine
models vLLM's scheduler. An unknown engine gets vLLM's names, said to be vLLM's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VLLM, SGLANG, TGI, LLAMACPP = "vllm", "sglang", "tgi", "llamacpp"
OWNED_BY = {
    "vllm": VLLM,
    "slogate-simengine": VLLM,
    "sglang": SGLANG,
    "tgi": TGI,
    "text-generation-inference": TGI,
    "llamacpp": LLAMACPP,
    "llama.cpp": LLAMACPP,
}
ENGINE_NAMES = {VLLM: "vLLM", SGLANG: "SGLang", TGI: "TGI", LLAMACPP: "llama.cpp"}

SETTINGS: dict[str, dict[str, str]] = {
    "prefill interference": {
        VLLM: "keep chunked prefill on and lower its per-step budget, "
        "--max-num-batched-tokens (e.g. 2048), so a long prompt is prefilled in pieces "
        "between decode steps",
        SGLANG: "lower --chunked-prefill-size (e.g. 2048) so a long prompt is prefilled "
        "in pieces between decode steps",
        TGI: "lower --max-batch-prefill-tokens so a prefill step is shorter",
        LLAMACPP: "lower --batch-size/--ubatch-size (e.g. 256) so a prompt is processed in "
        "smaller pieces between decode steps, or fewer --parallel slots",
    },
    "prefill-bound": {
        VLLM: "enable prefix caching (--enable-prefix-caching) for shared prefixes, "
        "shorten prompts, or add compute (tensor parallel, a faster GPU)",
        SGLANG: "keep the radix cache on (no --disable-radix-cache) for shared prefixes, "
        "shorten prompts, or add compute (--tp)",
        TGI: "enable prefix caching (PREFIX_CACHING=1), shorten prompts, or add compute",
        LLAMACPP: "reuse the slot's cached prompt (--cache-reuse 256), more threads "
        "(--threads), or shorter prompts",
    },
    "queueing": {
        VLLM: "more replicas or a lower request rate; raise --max-num-seqs only where the "
        "KV cache has room",
        SGLANG: "more replicas or a lower request rate; raise --max-running-requests only "
        "where --mem-fraction-static leaves room",
        TGI: "more replicas or a lower request rate; --max-concurrent-requests bounds the queue",
        LLAMACPP: "more --parallel slots (with --ctx-size raised to keep each slot's context) "
        "or more replicas",
    },
    "concurrency ceiling": {
        VLLM: "raise --max-num-seqs, and --gpu-memory-utilization if the KV cache is what "
        "fills (the engine's KV usage says which)",
        SGLANG: "raise --max-running-requests, and --mem-fraction-static if the KV cache fills",
        TGI: "raise --max-batch-size / --max-batch-total-tokens",
        LLAMACPP: "more --parallel slots, with --ctx-size raised so each keeps its context",
    },
    "preemption": {
        VLLM: "give the KV cache more memory (--gpu-memory-utilization, --kv-cache-dtype "
        "fp8), or lower --max-num-seqs / --max-model-len so fewer sequences share it",
        SGLANG: "raise --mem-fraction-static, or lower --max-running-requests",
        TGI: "lower --max-total-tokens or --max-batch-total-tokens to what the memory holds",
        LLAMACPP: "a larger --ctx-size (it is shared by the --parallel slots) or fewer slots",
    },
    "decode-bound": {
        VLLM: "lower --max-num-seqs (smaller batches: faster tokens, less throughput), "
        "speculative decoding, or more replicas",
        SGLANG: "lower --max-running-requests, speculative decoding, or more replicas",
        TGI: "lower --max-batch-size, or more replicas",
        LLAMACPP: "fewer --parallel slots, or more replicas",
    },
    "saturation": {
        VLLM: "more replicas or a lower rate: the engine completes no more at this setting",
        SGLANG: "more replicas (--dp) or a lower rate",
        TGI: "more replicas or a lower rate",
        LLAMACPP: "more replicas or a lower rate",
    },
    "cache effect": {
        VLLM: "keep prefix caching on (--enable-prefix-caching) and route a conversation's "
        "turns to the same replica",
        SGLANG: "keep the radix cache on and route a conversation to one replica "
        "(cache-aware routing)",
        TGI: "enable prefix caching and route a conversation to one replica",
        LLAMACPP: "--cache-reuse with enough --ctx-size per slot, and a conversation's "
        "turns on the same slot",
    },
}

SETTINGS["KV cache full"] = SETTINGS["preemption"]
# The engine's queue (or an open loop it could not keep up with) without the
# timelines' breakdown: the same advice as for queueing.
SETTINGS["capacity-bound"] = SETTINGS["queueing"]

UP, DOWN, ON = "up", "down", "on"
DIRECTIONS = (UP, DOWN, ON)


@dataclass(frozen=True)
class Remedy:
    """One setting of :data:`SETTINGS`' advice, by the name a tune varies it
    (vLLM's and the simulated engine's scheduler names; llama.cpp's long flags
    with underscores), and which way: ``up``, ``down`` or ``on``."""

    engine: str
    setting: str
    direction: str

    def to_dict(self) -> dict[str, str]:
        return {"engine": self.engine, "setting": self.setting, "direction": self.direction}


# The advice of SETTINGS a tune can try, per cause and engine; the rest of the
# advice (replicas, shorter prompts, another GPU) is not a setting of one engine.
REMEDIES: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "prefill interference": {
        VLLM: (("max_num_batched_tokens", DOWN), ("enable_chunked_prefill", ON)),
        LLAMACPP: (("batch_size", DOWN), ("ubatch_size", DOWN), ("parallel", DOWN)),
    },
    "prefill-bound": {VLLM: (("enable_prefix_caching", ON),)},
    "queueing": {VLLM: (("max_num_seqs", UP),), LLAMACPP: (("parallel", UP), ("ctx_size", UP))},
    "concurrency ceiling": {
        VLLM: (("max_num_seqs", UP),),
        LLAMACPP: (("parallel", UP), ("ctx_size", UP)),
    },
    "preemption": {
        VLLM: (("max_num_seqs", DOWN),),
        LLAMACPP: (("ctx_size", UP), ("parallel", DOWN)),
    },
    "decode-bound": {VLLM: (("max_num_seqs", DOWN),), LLAMACPP: (("parallel", DOWN),)},
    "cache effect": {VLLM: (("enable_prefix_caching", ON),)},
}
REMEDIES["KV cache full"] = REMEDIES["preemption"]
REMEDIES["capacity-bound"] = REMEDIES["queueing"]

EXPERIMENTS = {
    "prefill interference": "`slogate experiment prompt-length` (stalls and TTFT against "
    "prompt length)",
    "prefill-bound": "`slogate experiment prompt-length` (TTFT against prompt length)",
    "queueing": "`slogate sweep SCENARIO --find-max` (the highest rate that meets the SLOs)",
    "concurrency ceiling": "`slogate experiment concurrency` (latency and throughput "
    "against concurrency)",
    "preemption": "`slogate plan` (the sequences the KV cache holds) and "
    "`slogate experiment concurrency`",
    "KV cache full": "`slogate plan` (the sequences the KV cache holds) and "
    "`slogate experiment concurrency`",
    "decode-bound": "`slogate experiment concurrency` (ITL against batch size)",
    "saturation": "`slogate sweep SCENARIO --find-max`",
    "cache effect": "`slogate experiment prompt-length` with and without a shared prefix",
}
EXPERIMENTS["capacity-bound"] = EXPERIMENTS["queueing"]


def engine_family(meta: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> str | None:
    """The engine whose setting names apply: the scraped dialect, else the
    engine's ``owned_by``; None when neither says."""
    scraped = [s.get("engine") for s in samples if s.get("source") == "engine"]
    for name in scraped:
        if name in ENGINE_NAMES:
            return str(name)
    owned_by = str((meta.get("engine") or {}).get("owned_by") or "").lower()
    return OWNED_BY.get(owned_by)


def action(cause: str, engine: str | None) -> str:
    """The setting to try on this engine and the experiment to run, or ''."""
    settings = SETTINGS.get(cause)
    if settings is None:
        return ""
    known = engine if engine in settings else VLLM
    name = ENGINE_NAMES[known] + ("" if engine in settings else " (engine unknown)")
    return f"Try on {name}: {settings[known]}. Test it with {EXPERIMENTS[cause]}."


def remedies(cause: str, engine: str | None) -> tuple[Remedy, ...]:
    """The settings a tune can try for ``cause`` on ``engine`` (vLLM's where the
    engine is unknown, as :func:`action` advises)."""
    advice = REMEDIES.get(cause, {})
    known = engine if engine in SETTINGS.get(cause, {}) else VLLM
    return tuple(Remedy(known, setting, way) for setting, way in advice.get(known, ()))
