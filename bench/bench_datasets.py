"""What loading users' data files costs: a ShareGPT dump and a long trace.

Loading happens before any load is sent (and again in every worker process),
so it decides how long a run takes to start. Writes a synthetic ShareGPT JSON
list (real prose, 3 turns per conversation) and a lengths-only CSV in a
temporary folder, with a fresh token-count cache, and prints the first load
(tokens counted), the second (counts from the cache) and the planning time per
request, closed and open loop.

    .venv/bin/python bench/bench_datasets.py [--conversations 5000] [--rows 100000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from slogate import scenarios
from slogate.scenarios.prompt_text import corpus_text


def sharegpt(folder: Path, count: int) -> Path:
    text, rng = corpus_text("prose"), np.random.default_rng(0)

    def passage(chars: int) -> str:
        start = int(rng.integers(0, len(text) - chars))
        return text[start : start + chars]

    records = []
    for n in range(count):
        messages = []
        for _ in range(3):
            messages += [
                {"from": "human", "value": passage(int(rng.integers(200, 3000)))},
                {"from": "gpt", "value": passage(int(rng.integers(100, 1500)))},
            ]
        records.append({"id": str(n), "conversations": messages})
    path = folder / "sharegpt.json"
    path.write_text(json.dumps(records, indent=1))
    return path


def lengths(folder: Path, rows: int) -> Path:
    rng = np.random.default_rng(1)
    path = folder / "lengths.csv"
    pairs = zip(rng.integers(50, 8000, rows), rng.integers(1, 1000, rows), strict=True)
    path.write_text(
        "num_prefill_tokens,num_decode_tokens\n" + "".join(f"{i},{o}\n" for i, o in pairs)
    )
    return path


def timed_load(path: Path) -> tuple[float, scenarios.Scenario]:
    start = time.perf_counter()
    [s] = scenarios.load(path)
    return time.perf_counter() - start, s


def per_request_us(turns: itertools.islice) -> float:
    start = time.perf_counter()
    count = sum(1 for _ in turns)
    return (time.perf_counter() - start) / count * 1e6


def measure(label: str, folder: Path, file: Path, kind: str, requests: int) -> None:
    closed = folder / f"{label}-closed.yaml"
    closed.write_text(f"workload: {{kind: {kind}, file: {file.name}}}\nload: {{users: 1}}\n")
    opened = folder / f"{label}-open.yaml"
    opened.write_text(f"workload: {{kind: {kind}, file: {file.name}}}\nload: {{rate: 10}}\n")
    first, s = timed_load(closed)
    second, _ = timed_load(closed)
    planner = scenarios.Planner(s, 0)
    turns = itertools.chain.from_iterable(planner.conversation().turns for _ in itertools.count())
    closed_us = per_request_us(itertools.islice(turns, requests))
    [o] = scenarios.load(opened)
    open_us = per_request_us(itertools.islice(scenarios.Planner(o, 0).arrivals(), requests))
    size = file.stat().st_size / 1e6
    report = s.workload.report
    print(
        f"{label:<9} {size:>6.1f} MB {report.read:>8} {first:>9.2f} {second:>9.2f} "
        f"{closed_us:>11.0f} {open_us:>9.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(folder / "cache")
        print(f"{'file':<9} {'size':>9} {'read':>8} {'first s':>9} {'cached s':>9} "
              f"{'closed us':>11} {'open us':>9}")  # fmt: skip
        measure(
            "sharegpt", folder, sharegpt(folder, args.conversations), "conversations", args.requests
        )
        measure("lengths", folder, lengths(folder, args.rows), "trace", args.requests)


if __name__ == "__main__":
    main()
