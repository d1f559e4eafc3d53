"""``python -m slogate.simengine``: run the simulated engine (``slogate engine`` delegates here)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from slogate.simengine.config import build_config, parse_assignments
from slogate.simengine.faults import FaultError
from slogate.simengine.profiles import (
    DEFAULT_PROFILE,
    SCHEDULING_POLICIES,
    WEIGHT_BYTES,
    ProfileError,
    gpus,
    models,
)
from slogate.simengine.router import POLICIES

MAX_REPLICAS = 64


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simengine",
        description="A simulated GPU inference server (vLLM-compatible API) for load tests.",
        epilog=(
            "Profiles: MODEL@[TPx]GPU[:DTYPE][:KEY=VALUE]..., "
            "e.g. llama-3.1-70b@2xh100:fp8:kv=fp8, "
            "or a .yaml file. Use --list-profiles for the models and GPUs. See docs/simengine.md."
        ),
    )
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default {DEFAULT_PROFILE}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument(
        "--speedup", type=float, default=None, help="model seconds per wall second (default 1)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--stream-interval", type=int, default=None, help="tokens per SSE chunk")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--max-num-seqs", type=int, default=None)
    parser.add_argument("--max-num-batched-tokens", type=int, default=None)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--gpu-memory-utilization", type=float, default=None)
    parser.add_argument("--num-gpu-blocks", type=int, default=None, help="override KV capacity")
    parser.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="default on, as in vLLM",
    )
    parser.add_argument(
        "--scheduling-policy",
        choices=SCHEDULING_POLICIES,
        default=None,
        help="as vLLM's: fcfs (default) or priority (the request's priority field, lower first)",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="any engine or profile setting (repeatable), e.g. --set eos_median=200",
    )
    parser.add_argument(
        "--fault",
        action="append",
        metavar="KEY=VALUE",
        help="fault injection setting (repeatable), e.g. --fault http_429_rate=0.05",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="serve N replicas behind a router on --port, each on a port of its own",
    )
    parser.add_argument(
        "--router",
        choices=POLICIES,
        default="round-robin",
        help="with --replicas: how the router picks a replica (default round-robin)",
    )
    parser.add_argument(
        "--disaggregated",
        metavar="P:D",
        help="serve P prefill and D decode workers behind the router (not with --replicas): "
        "each prompt's KV travels to its decode worker at kv_transfer_gbps (--set)",
    )
    parser.add_argument(
        "--replica-fault",
        action="append",
        metavar="REPLICA:KEY=VALUE",
        help="fault injection on one replica (repeatable), e.g. replica-1:header_delay_s=0.5",
    )
    parser.add_argument("--list-profiles", action="store_true", help="list models and GPUs, exit")
    parser.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    return parser


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The flat settings :func:`slogate.simengine.config.build_config` takes."""
    overrides: dict[str, Any] = {}
    for key in (
        "speedup",
        "seed",
        "stream_interval",
        "served_model_name",
        "max_num_seqs",
        "max_num_batched_tokens",
        "max_model_len",
        "gpu_memory_utilization",
        "num_gpu_blocks",
        "enable_prefix_caching",
        "scheduling_policy",
    ):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    for key, value in parse_assignments(args.set, "--set").items():
        overrides[key] = yaml.safe_load(value)
    faults = parse_assignments(args.fault, "--fault")
    if faults:
        overrides["faults"] = faults
    return overrides


def disaggregated(text: str | None, replicas: int) -> tuple[int, int] | None:
    """``--disaggregated P:D``: prefill and decode workers, at least one each."""
    if text is None:
        return None
    if replicas != 1:
        raise ValueError("--disaggregated P:D counts the workers itself: not with --replicas")
    prefill, colon, decode = text.partition(":")
    if not (colon and prefill.isdigit() and decode.isdigit()):
        raise ValueError(f"--disaggregated {text!r}: expected P:D, e.g. 1:2")
    tiers = (int(prefill), int(decode))
    if min(tiers) < 1 or sum(tiers) > MAX_REPLICAS:
        raise ValueError(
            f"--disaggregated {text}: 1 to {MAX_REPLICAS} workers, each tier one or more"
        )
    return tiers


def replica_faults(items: list[str] | None) -> dict[str, dict[str, str]]:
    """``["replica-1:KEY=VALUE", ...]`` into each replica's fault settings."""
    faults: dict[str, dict[str, str]] = {}
    for item in items or []:
        name, sep, assignment = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--replica-fault {item!r}: expected REPLICA:KEY=VALUE")
        faults.setdefault(name.strip(), {}).update(
            parse_assignments([assignment], f"--replica-fault {name.strip()}:")
        )
    return dict(faults)


def _list_profiles() -> str:
    lines = ["models:"]
    lines += [f"  {key:16} {m.hf_id}" for key, m in models().items()]
    lines.append("gpus:")
    lines += [f"  {key:16} {g.name}" for key, g in gpus().items()]
    lines.append(f"weight dtypes: {', '.join(WEIGHT_BYTES)}; kv dtypes: auto, bf16, fp16, fp8")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_profiles:
        print(_list_profiles())
        return 0
    from slogate.simengine.deployment import replica_configs, serve_deployment
    from slogate.simengine.server import serve

    try:
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port {args.port}: expected 0 to 65535")
        if not 1 <= args.replicas <= MAX_REPLICAS:
            raise ValueError(f"--replicas {args.replicas}: expected 1 to {MAX_REPLICAS}")
        overrides = overrides_from_args(args)
        config = build_config(args.profile, **overrides)
        tiers = disaggregated(args.disaggregated, args.replicas)
        count = args.replicas if tiers is None else sum(tiers)
        faults = replica_faults(args.replica_fault)
        if faults and count == 1:
            raise ValueError("--replica-fault needs --replicas 2 or more")
        configs = replica_configs(config, count, faults, tiers)
    except (ProfileError, FaultError, ValueError) as exc:
        print(f"simengine: {exc}", file=sys.stderr)
        return 2
    import asyncio

    if count > 1:
        serving = serve_deployment(
            configs,
            args.router,
            args.host,
            args.port,
            prefill_workers=0 if tiers is None else tiers[0],
            exit_with_stdin=args.exit_with_stdin,
        )
    else:
        serving = serve(config, args.host, args.port, exit_with_stdin=args.exit_with_stdin)
    try:
        asyncio.run(serving)
    except OSError as exc:
        print(f"simengine: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
