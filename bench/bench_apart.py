"""What keeping requests apart by endpoint and replica costs the recorder,
per request (BENCHMARKS.md).

    .venv/bin/python bench/bench_apart.py [--requests 2000] [--tokens 256] [--repeats 5]

A request of ``--tokens`` output chunks (1 ms apart) is recorded by
``Recorder.record`` as a run records it, in four settings: with and without
time windows, and without an endpoint or with an endpoint and a served-by
replica (a run with several endpoints behind a router that names its
replicas). The lowest CPU time per request of ``--repeats`` (process time, so
other processes on a shared machine count less) is printed as a Markdown
table, with the load average. Only runs with several endpoints or a served-by
header pay the apart rows: ``apart(record)`` is empty otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord

MS = 1_000_000


def request(tokens: int, endpoint: str | None, served_by: str | None) -> RequestRecord:
    record = RequestRecord("chat", start_ns=0, endpoint=endpoint, served_by=served_by)
    record.chunk_ns = [50 * MS + k * MS for k in range(tokens)]
    record.chunk_chars = [4] * tokens
    record.end_ns = record.chunk_ns[-1] + MS
    record.output_tokens = tokens
    record.input_tokens = 1000
    return record


def cost_us(requests: int, tokens: int, windows: bool, apart: bool, repeats: int) -> float:
    """The lowest CPU microseconds per recorded request over ``repeats``."""
    best = float("inf")
    for _ in range(repeats):
        recorder = Recorder(window_s=5.0)
        recorder.origin_s = 0.0 if windows else None
        batch = [
            request(tokens, "a" if apart else None, "r1" if apart else None)
            for _ in range(requests)
        ]
        start = time.process_time()
        for i, record in enumerate(batch):
            recorder.record(record, wall_s=i * 0.01)
        best = min(best, (time.process_time() - start) / requests * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| time windows | endpoint and replica | CPU us per request |")
    print("|---|---|---|")
    for windows in (False, True):
        for apart in (False, True):
            us = cost_us(args.requests, args.tokens, windows, apart, args.repeats)
            print(f"| {'yes' if windows else 'no'} | {'yes' if apart else 'no'} | {us:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
