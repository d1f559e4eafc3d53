"""How long the run's data-to-disk work holds the event loop, per flush.

Feeds a recorder as a 256-stream run would (every second, ``--rate`` requests
of varied lengths over ``--stages`` stages, windows closed as the session
closes them) and times, on the same data, what the judging process does on its
loop to keep its data on disk: the journal's flush every second (this code;
whole, and each slice between two of its pauses, where the loop runs), and
the whole-RunData checkpoint it replaced (encode and save everything, every
5 s, in one piece). The pending ITL batches are recorded into the histograms before
either is timed: that work is the recording's own, done on any read.

    .venv/bin/python bench/bench_journal.py --seconds 120 --rate 256
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reportdata import request  # noqa: E402

from slogate.analysis.journal import JOURNAL_FILE, JournalWriter  # noqa: E402
from slogate.analysis.recorder import Recorder  # noqa: E402
from slogate.analysis.rundata import RunData  # noqa: E402
from slogate.analysis.timeseries import window_row  # noqa: E402

CHECKPOINT_S = 5  # the replaced checkpoint's period
META = {"run_id": "bench", "complete": False, "incomplete_reason": None, "measured_s": 0.0}


def feed(recorder: Recorder, second: int, rate: int, stage: str, rng: random.Random) -> None:
    for i in range(rate):
        record = request(
            ttft_ms=rng.lognormvariate(5.0, 0.4),
            itl_ms=rng.lognormvariate(3.0, 0.2),
            tokens=rng.randint(16, 256),
        )
        recorder.record(record, second + i / rate, stage=stage)


def settle(recorder: Recorder) -> None:
    for bucket in [*recorder.buckets.values(), *recorder.windows.values()]:
        for _ in bucket.histograms:  # reading records the pending batches
            pass


def summary(times_ms: list[float]) -> dict[str, float]:
    values = np.asarray(times_ms)
    return {
        "count": len(values),
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p99_ms": round(float(np.percentile(values, 99)), 3),
        "max_ms": round(float(values.max()), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--rate", type=int, default=256, help="requests finished per second")
    parser.add_argument("--stages", type=int, default=4)
    args = parser.parse_args()
    rng = random.Random(1)
    recorder = Recorder(window_s=5.0)
    recorder.origin_s = 0.0
    rows: list[dict] = []
    journal_ms: list[float] = []
    slices_ms: list[float] = []
    checkpoint_ms: list[float] = []
    last = [0.0]

    def pause() -> None:  # the loop would run here: time the work since the last
        now = time.perf_counter()
        slices_ms.append((now - last[0]) * 1000)
        last[0] = time.perf_counter()

    with tempfile.TemporaryDirectory() as folder:
        journal = JournalWriter(Path(folder, "journal", JOURNAL_FILE), META)
        for second in range(args.seconds):
            stage = f"stage-{second * args.stages // args.seconds}"
            feed(recorder, second, args.rate, stage, rng)
            settle(recorder)
            for (scenario, index), bucket in sorted(recorder.pop_windows(second // 5).items()):
                rows.append(window_row(scenario, index, 5.0, bucket, {"users": 256}))
            meta = {**META, "measured_s": float(second)}
            start = last[0] = time.perf_counter()
            journal.flush(recorder.buckets, rows, meta, pause)
            journal_ms.append((time.perf_counter() - start) * 1000)
            if second % CHECKPOINT_S == CHECKPOINT_S - 1:
                run = RunData(meta=meta, buckets=recorder.buckets, timeseries=rows)
                start = time.perf_counter()
                run.save(Path(folder, "checkpoint"))
                checkpoint_ms.append((time.perf_counter() - start) * 1000)
        journal_bytes = Path(folder, "journal", JOURNAL_FILE).stat().st_size
    histograms = sum(len(b.histograms.names()) for b in recorder.buckets.values())
    print(json.dumps({
        "seconds": args.seconds,
        "rate": args.rate,
        "buckets": len(recorder.buckets),
        "histograms": histograms,
        "journal_flush_every_1s": summary(journal_ms),
        "journal_held_between_pauses": summary(slices_ms),
        "journal_bytes_per_s": round(journal_bytes / args.seconds),
        "checkpoint_every_5s": summary(checkpoint_ms),
        "last_checkpoint_ms": round(checkpoint_ms[-1], 3),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
