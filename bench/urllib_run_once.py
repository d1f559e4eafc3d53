"""A plain urllib measurement of TTFT and TPOT, the kind a tutorial on LLM
inference performance writes, for comparison with slogate's client.

The measuring logic is the tutorial script's, unchanged: ``for raw in resp``,
``delta.get("content")``, ``perf_counter`` on the first content line. Only the
URL, model and max_tokens became parameters, and it also returns the
``perf_counter_ns`` start and first-token instants, so ``bench_client.py`` can
set its TTFT beside the server's truth.
"""

from __future__ import annotations

import json
import time
import urllib.request


def run_once(url: str, prompt: str, model: str = "exact-model", max_tokens: int = 256) -> dict:
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
            "max_tokens": max_tokens,
        }
    ).encode("utf-8")

    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})

    start = time.perf_counter()
    start_ns = time.perf_counter_ns()
    first = None
    first_ns = None
    tokens = 0

    with urllib.request.urlopen(req) as resp:
        for raw in resp:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            payload = line[len("data:") :].strip()
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            delta = chunk["choices"][0].get("delta", {})
            if delta.get("content"):
                tokens += 1
                if first is None:
                    first = time.perf_counter()
                    first_ns = time.perf_counter_ns()

    end = time.perf_counter()
    ttft = (first - start) if first else float("nan")
    tpot = ((end - first) / (tokens - 1)) if tokens > 1 else float("nan")
    return {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tokens": tokens,
        "total_s": end - start,
        "tokens_per_s": tokens / (end - start),
        "start_ns": start_ns,
        "first_ns": first_ns,
    }
