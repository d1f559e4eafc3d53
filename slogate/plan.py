"""`slogate plan`: what a model on a GPU holds, before renting the GPU.

Weight memory, KV bytes per token, tokens that fit in the KV cache and the
sequences of a context length that run at once, all from the simulated
engine's profiles (``slogate.simengine.profiles``), combined by
``slogate.analysis.capacity.kv_plan``. With a price, the cost per million tokens at
the throughput the simulated engine reaches with that many sequences (an
offline roofline simulation, labelled as an estimate, never as a measurement).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from slogate.analysis.capacity import Pricing, cost_block, kv_formula, kv_plan
from slogate.analysis.slo import EXIT_CONFIG
from slogate.locustfiles.options import PRICE
from slogate.simengine.profiles import Profile, ProfileError, load_profile
from slogate.simengine.simulate import simulate_closed_loop

GB = 1e9
WORKED_EXAMPLE = {"model": "llama-2-7b", "gpu": "l4", "dtype": "fp16", "batch": 4, "context": 4096}
ESTIMATE_MAX_CONCURRENCY = 1024
MIN_TABLE_CONTEXT = 512


def add_plan_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="KV-cache and memory plan of a model on a GPU (from the simulated profiles)",
        description="Weight memory, KV bytes per token, tokens in the KV cache and max "
        "concurrent sequences at a context length; with --gpu-price-per-hour, the cost "
        "per million tokens at the simulated engine's throughput.",
    )
    p.add_argument("--profile", help="a full profile name, e.g. llama-3.1-8b@h100:fp8")
    p.add_argument("--model", help="model, e.g. llama-3.1-8b, llama-2-7b, qwen2.5-7b")
    p.add_argument("--gpu", help="GPU, e.g. h100, h200, a100, l40s, l4")
    p.add_argument("--gpus", type=int, help="GPUs (tensor parallel), default 1")
    p.add_argument("--dtype", help="weight dtype: bf16, fp16, fp8, int8, int4")
    p.add_argument("--kv-dtype", help="KV-cache dtype: bf16, fp16, fp8 (default: the model's)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="engine setting, e.g. gpu_memory_utilization=0.8, max_num_seqs=256",
    )
    p.add_argument(
        "--context", type=int, help="tokens per sequence (prompt + output), default 4096"
    )
    p.add_argument("--batch", type=int, help="also size the KV cache of this many sequences")
    p.add_argument(
        "--output-tokens",
        type=int,
        default=256,
        help="output tokens per request for the throughput estimate (default 256)",
    )
    PRICE.add_to_cli(p)
    p.add_argument(
        "--worked-example",
        action="store_true",
        help="the textbook KV-cache example: Llama-2-7B fp16, batch 4, 4096 tokens, 24 GB L4",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--out", help="also write plan.json and contexts.csv into this folder")


def profile_from_args(args: argparse.Namespace) -> Profile:
    """The profile named by --profile, or built from --model/--gpu/--gpus/--dtype/--kv-dtype."""
    settings = dict(parse_setting(text) for text in args.set)
    if args.profile:
        if args.model or args.gpu:
            raise ProfileError("give either --profile or --model/--gpu, not both")
        return load_profile(args.profile, **settings)
    if not args.model or not args.gpu:
        raise ProfileError("name the deployment: --model M --gpu G (or --profile NAME)")
    name = f"{args.model}@{args.gpus}x{args.gpu}" if args.gpus else f"{args.model}@{args.gpu}"
    if args.dtype:
        name += f":{args.dtype}"
    if args.kv_dtype:
        name += f":kv={args.kv_dtype}"
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


def gb(value: float) -> str:
    return f"{value / GB:,.2f} GB"


def render_text(p: dict[str, Any]) -> str:
    lines = [
        f"Plan: {p['profile']} ({p['model']} on {p['gpus']} x {p['gpu']})",
        f"  GPU memory              {gb(p['gpu_memory_bytes'])}, "
        f"{100 * p['gpu_memory_utilization']:.0f}% usable",
        f"  weights ({p['weight_dtype']})".ljust(26) + gb(p["weight_bytes"]),
        f"  runtime reserve         {gb(p['runtime_reserve_bytes'])}",
        f"  KV-cache budget         {gb(p['kv_budget_bytes'])}",
        f"  KV bytes per token      {p['kv_bytes_per_token']:,} B ({p['kv_dtype']})",
        f"  tokens in the KV cache  {p['kv_capacity_tokens']:,}",
        f"  context length          {p['context_tokens']:,} tokens = "
        f"{p['blocks_per_sequence']} blocks of {p['block_size']}",
        f"  max concurrent seqs     {p['max_concurrent_sequences']:,} (limited by "
        f"{'the KV cache' if p['limited_by'] == 'kv_cache' else 'max_num_seqs'}; "
        f"KV holds {p['max_sequences_by_kv']:,}, scheduler allows {p['max_num_seqs']:,})",
    ]
    if p["context_tokens"] > p["max_model_len"]:
        lines.append(
            f"  NOTE: the context exceeds the longest sequence served, {p['max_model_len']:,}"
        )
    if p["batch"] is not None:
        verdict = "fits" if p["batch_fits"] else "does NOT fit"
        lines.append(
            f"  batch of {p['batch']} x {p['context_tokens']:,} tokens: KV "
            f"{gb(p['batch_kv_bytes'])} = {p['kv_formula']['expression']}; with the weights "
            f"{gb(p['batch_kv_bytes'] + p['weight_bytes'])}: {verdict}"
        )
    lines.append("  max concurrent sequences by context length:")
    lines += [
        f"    {c['context_tokens']:>7,} tokens: {c['max_concurrent_sequences']:>6,}"
        f"   ({gb(c['kv_bytes_per_sequence'])} KV each)"
        for c in p["contexts"]
    ]
    if p["cost"] is not None:
        e, c = p["estimate"], p["cost"]
        lines += [
            f"  {c['basis']}, {e['input_tokens']} in / {e['output_tokens']} out:",
            f"    {e['output_tokens_per_s']:,.0f} output tokens/s, {e['input_tokens_per_s']:,.0f} "
            f"input tokens/s, TTFT mean {e['ttft_mean_ms']:,.0f} ms, "
            f"TPOT mean {e['tpot_mean_ms']:.1f} ms",
            f"    cost at {c['price_per_hour']:g}/hour: {c['per_million_output_tokens']:.4g} per "
            f"million output tokens, {c['per_million_input_tokens']:.4g} per million input tokens",
        ]
    return "\n".join(lines)


def write_plan(out: Path, plan: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    with (out / "contexts.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(plan["contexts"][0]))
        writer.writeheader()
        writer.writerows(plan["contexts"])


def plan_command(args: argparse.Namespace) -> int:
    if args.worked_example:
        for key, value in WORKED_EXAMPLE.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    try:
        profile = profile_from_args(args)
        plan = build_plan(
            profile, args.context or 4096, args.batch, args.output_tokens, args.gpu_price_per_hour
        )
    except (ProfileError, ValueError) as error:
        print(f"slogate plan: {error}", file=sys.stderr)
        return EXIT_CONFIG
    print(json.dumps(plan, indent=1) if args.json else render_text(plan))
    if args.out:
        write_plan(Path(args.out), plan)
    return 0
