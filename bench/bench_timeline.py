"""Drawing the request timeline of the largest run the timelines keep.

``data/timelines.json`` holds at most 500,000 requests (analysis/measurement/timelines.py),
each with up to 8 long gaps: this builds that many (sent 2 ms apart by 4,096
closed-loop users in turn, random TTFT, E2E and TPOT, 8 gaps each, so 4
million gaps) and times ``timeline_html``, which samples whole users and about
2,000 of their requests and draws them in a lane per user. It runs inside
``write_results`` after every run, so it should take a second, not many.

    .venv/bin/python bench/bench_timeline.py [--requests 500000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from slogate.analysis.measurement.timelines import (
    COLUMNS,
    FLAGS,
    GAPS_PER_REQUEST,
    MAX_REQUESTS,
    Timelines,
)
from slogate.reports.request_timeline import timeline_html

USERS = 4096  # each sends every 8.2 s, longer than any request's E2E (5 s)


def largest(requests: int) -> Timelines:
    rng = random.Random(1)
    t = Timelines(scenarios=["chat"])
    t.scenario.extend([0] * requests)
    t.user.extend(i % USERS for i in range(requests))
    drawn = {
        "start_s": [1.7e9 + i * 0.002 for i in range(requests)],
        "ttft_ms": [rng.uniform(20, 400) for _ in range(requests)],
        "e2e_ms": [rng.uniform(500, 5000) for _ in range(requests)],
        "tpot_ms": [rng.uniform(5, 40) for _ in range(requests)],
    }
    for name in COLUMNS:
        t.columns[name].extend(drawn.get(name, [100.0] * requests))
    for name in FLAGS:
        t.flags[name].extend([int(name == "ok")] * requests)
    for row in range(requests):
        for k in range(GAPS_PER_REQUEST):
            t.gap_row.append(row)
            t.gap_end_ms.append(100.0 + 50.0 * k)
            t.gap_ms.append(30.0)
    return t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=MAX_REQUESTS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    t = largest(args.requests)
    times, size = [], 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        size = len(timeline_html(t, {"run_id": "bench"}, {}, "pass"))
        times.append(time.perf_counter() - started)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    print(
        f"{args.requests:,} requests, {len(t.gap_row):,} gaps: timeline.html in "
        f"{min(times):.2f} s (min of {args.repeat}), {size / 1e6:.2f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
