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
sys.path.insert(0, str(ROOT / "tests" / "support"))

from reportdata import request  # noqa: E402

from slogate.analysis.documents.journal import JOURNAL_FILE, JournalWriter  # noqa: E402
from slogate.analysis.documents.rundata import RunData  # noqa: E402
from slogate.analysis.measurement.recorder import Recorder  # noqa: E402
from slogate.analysis.measurement.timeseries import window_row  # noqa: E402

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


class Timings:
    """Wall time (what the event loop waits) and this thread's CPU time (the
    work itself, whatever else the machine runs) of repeated spans."""

    def __init__(self) -> None:
        self.wall_ms: list[float] = []
        self.cpu_ms: list[float] = []
        self._from = (0.0, 0.0)

    def start(self) -> None:
        self._from = (time.perf_counter(), time.thread_time())

    def stop(self) -> None:
        self.wall_ms.append((time.perf_counter() - self._from[0]) * 1000)
        self.cpu_ms.append((time.thread_time() - self._from[1]) * 1000)

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"count": len(self.wall_ms)}
        for name, values in (("wall", self.wall_ms), ("cpu", self.cpu_ms)):
            array = np.asarray(values)
            out[name] = {
                "p50_ms": round(float(np.percentile(array, 50)), 3),
                "p99_ms": round(float(np.percentile(array, 99)), 3),
                "max_ms": round(float(array.max()), 3),
            }
        return out


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
    journal = Timings()
    slices = Timings()
    checkpoint = Timings()

    def pause() -> None:  # the loop would run here: time the work since the last
        slices.stop()
        slices.start()

    with tempfile.TemporaryDirectory() as folder:
        writer = JournalWriter(Path(folder, "journal", JOURNAL_FILE), META)
        for second in range(args.seconds):
            stage = f"stage-{second * args.stages // args.seconds}"
            feed(recorder, second, args.rate, stage, rng)
            settle(recorder)
            for (scenario, index), bucket in sorted(recorder.pop_windows(second // 5).items()):
                rows.append(window_row(scenario, index, 5.0, bucket, {"users": 256}))
            meta = {**META, "measured_s": float(second)}
            journal.start()
            slices.start()
            writer.flush(recorder.buckets, rows, meta, pause)
            slices.stop()
            journal.stop()
            if second % CHECKPOINT_S == CHECKPOINT_S - 1:
                run = RunData(meta=meta, buckets=recorder.buckets, timeseries=rows)
                checkpoint.start()
                run.save(Path(folder, "checkpoint"))
                checkpoint.stop()
        journal_bytes = Path(folder, "journal", JOURNAL_FILE).stat().st_size
    histograms = sum(len(b.histograms.names()) for b in recorder.buckets.values())
    print(json.dumps({
        "seconds": args.seconds,
        "rate": args.rate,
        "buckets": len(recorder.buckets),
        "histograms": histograms,
        "journal_flush_every_1s": journal.summary(),
        "journal_held_between_pauses": slices.summary(),
        "journal_bytes_per_s": round(journal_bytes / args.seconds),
        "checkpoint_every_5s": checkpoint.summary(),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
