"""Plans: what a model on a GPU holds, before renting the GPU.

Weight memory, KV bytes per token, tokens that fit in the KV cache and the
sequences of a context length that run at once, all from the simulated
engine's profiles (``slogate.simengine.profiles``), combined by
``slogate.analysis.measurement.costs.kv_plan``. With a price, the cost per million tokens at
the throughput the simulated engine reaches with that many sequences (an
offline roofline simulation, labelled as an estimate, never as a measurement).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from slogate.analysis.measurement.costs import Pricing, cost_block, kv_formula, kv_plan
from slogate.simengine.profiles import Profile, ProfileError, load_profile
from slogate.simengine.simulate import simulate_closed_loop

DEFAULT_CONTEXT = 4096
ESTIMATE_MAX_CONCURRENCY = 1024
MIN_TABLE_CONTEXT = 512


@dataclass(frozen=True)
class PlanRequest:
    """The deployment to plan: a full ``profile`` name, or ``model`` on ``gpu``
    (``gpus`` of them, weights in ``dtype``, KV cache in ``kv_dtype``), with
    engine ``settings`` as ``KEY=VALUE``; the context, an optional batch to size,
    and the output length and price of the cost estimate."""

    profile: str | None = None
    model: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    dtype: str | None = None
    kv_dtype: str | None = None
    settings: tuple[str, ...] = ()
    context: int | None = None
    batch: int | None = None
    output_tokens: int = 256
    price_per_hour: float | None = None

    def worked_example(self) -> PlanRequest:
        """The textbook KV-cache example filling whatever was not given."""
        given = {
            f.name: getattr(WORKED_EXAMPLE, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is None
        }
        return dataclasses.replace(self, **given)


WORKED_EXAMPLE = PlanRequest(model="llama-2-7b", gpu="l4", dtype="fp16", batch=4, context=4096)


def request_profile(request: PlanRequest) -> Profile:
    """The profile named by --profile, or built from --model/--gpu/--gpus/--dtype/--kv-dtype."""
    settings = dict(parse_setting(text) for text in request.settings)
    if request.profile:
        if request.model or request.gpu:
            raise ProfileError("give either --profile or --model/--gpu, not both")
        return load_profile(request.profile, **settings)
    if not request.model or not request.gpu:
        raise ProfileError("name the deployment: --model M --gpu G (or --profile NAME)")
    name = (
        f"{request.model}@{request.gpus}x{request.gpu}"
        if request.gpus
        else f"{request.model}@{request.gpu}"
    )
    if request.dtype:
        name += f":{request.dtype}"
    if request.kv_dtype:
        name += f":kv={request.kv_dtype}"
    return load_profile(name, **settings)


def parse_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ProfileError(f"--set {text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def table_contexts(max_model_len: int, context: int) -> list[int]:
    """512, 1024, ... up to the longest sequence served, and the planned context."""
    contexts = set()
    n = MIN_TABLE_CONTEXT
    while n < max_model_len:
        contexts.add(n)
        n *= 2
    contexts.update({max_model_len, min(context, max_model_len)})
    return sorted(contexts)


def estimate(profile: Profile, context: int, output_tokens: int, concurrency: int) -> dict:
    """Closed-loop throughput of the simulated engine at ``concurrency`` sequences."""
    output = max(1, min(output_tokens, context - 1))
    sim = simulate_closed_loop(
        profile,
        concurrency=min(concurrency, ESTIMATE_MAX_CONCURRENCY),
        input_tokens=context - output,
        output_tokens=output,
    )
    return {
        "concurrency": sim.concurrency,
        "input_tokens": sim.input_tokens,
        "output_tokens": sim.output_tokens,
        "output_tokens_per_s": sim.output_tokens_per_s,
        "input_tokens_per_s": sim.requests_per_s * sim.input_tokens,
        "requests_per_s": sim.requests_per_s,
        "ttft_mean_ms": 1000 * sim.ttft_mean_s,
        "tpot_mean_ms": 1000 * sim.tpot_mean_s,
        "preemptions": sim.preemptions,
    }


def build_plan(
    profile: Profile, context: int, batch: int | None, output_tokens: int, price: float | None
) -> dict[str, Any]:
    plan = kv_plan(profile, context, batch)
    result: dict[str, Any] = {"schema": "slogate.plan/1", **profile.describe(), **plan.to_dict()}
    if batch is not None:
        formula = kv_formula(profile, batch, context)
        result["kv_formula"] = {"expression": formula.expression, "bytes": formula.bytes}
    result["contexts"] = [
        {
            "context_tokens": c,
            "kv_bytes_per_sequence": profile.kv_cache_bytes(c),
            "max_concurrent_sequences": kv_plan(profile, c).max_concurrent_sequences,
        }
        for c in table_contexts(plan.max_model_len, context)
    ]
    result["estimate"] = None
    result["cost"] = None
    if price is not None and plan.max_concurrent_sequences >= 1:
        est = estimate(
            profile, min(context, plan.max_model_len), output_tokens, plan.max_concurrent_sequences
        )
        result["estimate"] = est
        pricing = Pricing(price, profile.tp)
        result["cost"] = cost_block(
            pricing,
            est["output_tokens_per_s"],
            est["input_tokens_per_s"],
            f"roofline estimate, simulated engine at {est['concurrency']} concurrent sequences",
        )
    return result


def plan_for(request: PlanRequest) -> dict[str, Any]:
    """The plan document (``slogate.plan/1``) of the requested deployment."""
    return build_plan(
        request_profile(request),
        request.context or DEFAULT_CONTEXT,
        request.batch,
        request.output_tokens,
        request.price_per_hour,
    )
