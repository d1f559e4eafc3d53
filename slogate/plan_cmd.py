"""`slogate plan`: parses its flags and prints (or saves) the plan.

The plan itself (weights, KV cache, sequences, the cost estimate) is
:mod:`slogate.studies.plan`; its text and files are :mod:`slogate.reports.plan_text`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
from slogate.locustfiles.argtypes import positive_int
from slogate.locustfiles.options import PRICE
from slogate.reports.plan_text import plan_text, write_plan
from slogate.simengine.profiles import ProfileError
from slogate.studies.plan import PlanRequest, plan_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Weight memory, KV bytes per token, tokens in the KV cache and max "
        "concurrent sequences at a context length; with --gpu-price-per-hour, the cost "
        "per million tokens at the simulated engine's throughput."
    )
    p.add_argument("--profile", help="a full profile name, e.g. llama-3.1-8b@h100:fp8")
    p.add_argument("--model", help="model, e.g. llama-3.1-8b, llama-2-7b, qwen2.5-7b")
    p.add_argument("--gpu", help="GPU, e.g. h100, h200, a100, l40s, l4")
    p.add_argument("--gpus", type=positive_int, help="GPUs (tensor parallel), default 1")
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
        "--context", type=positive_int, help="tokens per sequence (prompt + output), default 4096"
    )
    p.add_argument(
        "--batch", type=positive_int, help="also size the KV cache of this many sequences"
    )
    p.add_argument(
        "--output-tokens",
        type=positive_int,
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


def plan_request(args: argparse.Namespace) -> PlanRequest:
    """The flags as the study's typed request (the worked example fills the gaps)."""
    request = PlanRequest(
        profile=args.profile,
        model=args.model,
        gpu=args.gpu,
        gpus=args.gpus,
        dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        settings=tuple(args.set),
        context=args.context,
        batch=args.batch,
        output_tokens=args.output_tokens,
        price_per_hour=args.gpu_price_per_hour,
    )
    return request.worked_example() if args.worked_example else request


def plan_command(args: argparse.Namespace) -> int:
    try:
        plan = plan_for(plan_request(args))
    except (ProfileError, ValueError) as error:
        print(f"slogate plan: {error}", file=sys.stderr)
        return EXIT_CONFIG
    print(json.dumps(plan, indent=1) if args.json else plan_text(plan))
    if args.out:
        write_plan(Path(args.out), plan)
    return 0
