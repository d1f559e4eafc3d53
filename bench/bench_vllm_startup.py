"""The CPU vLLM's start-up and token pace, compiled (with its cache) against
``--enforce-eager`` (docs/benchmarks-history.md, "vLLM on a CPU: start-up, compiled or eager").

    .venv/bin/python bench/bench_vllm_startup.py [--repeats 2] [--tokens 64] [--streams 3]

For each mode it starts the server (``make vllm`` first) on the last core,
times the start until it serves, then streams ``--streams`` completions of
``--tokens`` tokens one after another from the other core and reports the
mean gap between their tokens as the client saw them (vLLM sends one token a
chunk). The first compiled start of a fresh cache compiles; later ones load
the compiled graph from the cache under the vLLM environment.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from itertools import pairwise

from slogate.engines.vllm import (
    MODEL_ALIAS,
    VllmServer,
    VllmServerConfig,
    engine_cores_default,
    generator_cores,
)

PROMPT = "Write a long story about the sea, the wind and a lighthouse keeper."


def token_gaps_ms(url: str, tokens: int) -> list[float]:
    """The gaps between one streamed completion's chunks, in ms."""
    body = {
        "model": MODEL_ALIAS,
        "prompt": PROMPT,
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    stamps: list[float] = []
    with urllib.request.urlopen(request, timeout=300) as response:
        for raw in response:
            if raw.startswith(b"data:") and b"[DONE]" not in raw:
                stamps.append(time.perf_counter())
    return [(b - a) * 1000 for a, b in pairwise(stamps)]


def one(eager: bool, args: argparse.Namespace) -> dict:
    load = os.getloadavg()[0]
    started = time.monotonic()
    with VllmServer(VllmServerConfig(port=0, enforce_eager=eager)) as server:
        start_s = time.monotonic() - started
        gaps = [g for _ in range(args.streams) for g in token_gaps_ms(server.url, args.tokens)]
    gaps.sort()
    return {
        "mode": "eager" if eager else "compiled",
        "start_s": round(start_s, 1),
        "itl_mean_ms": round(sum(gaps) / len(gaps), 2),
        "itl_p50_ms": round(gaps[len(gaps) // 2], 2),
        "gaps": len(gaps),
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--streams", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, set(generator_cores(engine_cores_default())))
    rows = []
    for _ in range(args.repeats):
        for eager in (False, True):
            row = one(eager, args)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("| mode | start s | ITL mean ms | ITL p50 ms | gaps | load average |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['start_s']} | {r['itl_mean_ms']} | {r['itl_p50_ms']} | "
            f"{r['gaps']} | {r['load_average'][0]} to {r['load_average'][1]} |"
        )


if __name__ == "__main__":
    main()
