"""How long the timeline diagnosis takes on a long run's requests, and what
the timelines cost to keep.

Builds ``--requests`` timelines of a synthetic open-loop run (Poisson sends,
lengths and latencies drawn, a stall in every fifth stream, half of them
ending at another request's first token; conversations of 4 turns), then
times: recording them (``Timelines.add`` per request, as the load side does),
encoding and decoding them (the save and the report), and
``timeline_findings`` with every latency SLO failed (every rule runs).

    .venv/bin/python bench/bench_diagnosis.py --requests 100000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from slogate.analysis.diagnosis.causes import timeline_findings
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.analysis.measurement.timelines import Timelines

NS = 1_000_000_000
LIMITS = {"ttft_ms": 200.0, "itl_ms": 30.0, "tpot_ms": 20.0, "e2e_ms": 5000.0}


def records(n: int, seed: int) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.exponential(0.02, n)) * NS
    inputs = rng.integers(100, 4000, n)
    ttft = (0.05 + inputs / 1000 * 0.03 + rng.exponential(0.05, n)) * NS
    out = []
    for i in range(n):
        start = int(starts[i])
        first = start + int(ttft[i])
        chunks = [first + k * 15_000_000 for k in range(64)]
        if i % 5 == 0:  # a stall of 300 ms before chunk 30
            chunks = chunks[:30] + [c + 300_000_000 for c in chunks[30:]]
        r = RequestRecord(scenario="chat", start_ns=start, end_ns=chunks[-1] + 1_000_000)
        r.chunk_ns, r.chunk_chars = chunks, [4] * len(chunks)
        r.output_tokens, r.input_tokens = len(chunks), int(inputs[i])
        r.conversation, r.turn = i // 4, i % 4
        out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    made = records(args.requests, args.seed)
    metrics = [request_metrics(r) for r in made]
    timelines = Timelines()
    t0 = time.perf_counter()
    for r, m in zip(made, metrics, strict=True):
        timelines.add(r, m, end_wall_s=r.end_ns / NS, warmup=False)
    add_s = time.perf_counter() - t0
    arrays = [*timelines.columns.values(), *timelines.flags.values(), timelines.scenario]
    arrays += [timelines.gap_row, timelines.gap_end_ms, timelines.gap_ms]
    kept = sum(len(a) * a.itemsize for a in arrays)
    t0 = time.perf_counter()
    text = json.dumps(timelines.encode())
    encode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    decoded = Timelines.decode(json.loads(text))
    decode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    findings = timeline_findings(decoded, {"chat": LIMITS})
    diagnose_s = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "requests": args.requests,
                "gaps": len(decoded.gap_ms),
                "add_us_per_request": round(add_s / args.requests * 1e6, 2),
                "kept_bytes": kept,
                "json_bytes": len(text),
                "encode_s": round(encode_s, 3),
                "decode_s": round(decode_s, 3),
                "diagnose_s": round(diagnose_s, 3),
                "causes": [f.cause for f in findings],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
