"""A plan as text for the terminal, and as plan.json and contexts.csv in a folder."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GB = 1e9


def gb(value: float) -> str:
    return f"{value / GB:,.2f} GB"


def plan_text(p: Mapping[str, Any]) -> str:
    """The plan as the lines `slogate plan` prints: memory, KV cache, sequences, cost."""
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


def write_plan(out: Path, plan: Mapping[str, Any]) -> None:
    """plan.json and contexts.csv (max concurrent sequences by context length)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    with (out / "contexts.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(plan["contexts"][0]))
        writer.writeheader()
        writer.writerows(plan["contexts"])
