"""Engine time of a pruned tune against the full grid on the simulated engine.

The same six treatments (``max_num_seqs`` 1, 2, 4 x ``tp`` 1, 2 on
llama-3.1-8b@h100, 128 in / 32 out at constant arrivals, TTFT p50 150 ms) are
tuned twice: with screening and pruning, and with ``--no-prune`` (a full,
confirmed search of every treatment). Prints each tune's engine time (every
engine's start to stop, summed), its trial count, the recommended treatment
and the saving; both must recommend the same treatment.

    .venv/bin/python bench/bench_tune.py [--duration 6s] [--screen-duration 2s]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "tests" / "data" / "tune-capped.yaml"
FACTORS = [
    "--set",
    "max_num_seqs=1,2,4",
    "--set",
    "tp=1,2",
    "--current",
    "max_num_seqs=2",
    "--current",
    "tp=1",
]


def tune(folder: Path, args: argparse.Namespace, *extra: str) -> dict:
    out = folder / ("grid" if extra else "pruned")
    cmd = [sys.executable, "-m", "slogate.cli", "tune", str(SCENARIO), *FACTORS, "--out", str(out)]
    cmd += ["--duration", args.duration, "--screen-duration", args.screen_duration]
    cmd += ["--tolerance", "0.25", "--warmup", "1s", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"tune failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    doc: dict = json.loads((out / "tune.json").read_text())
    doc["trials"] = len(list(out.glob("treatments/*/*/runs/*.log")))
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="6s")
    parser.add_argument("--screen-duration", default="2s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pruned = tune(Path(tmp), args)
        grid = tune(Path(tmp), args, "--no-prune")
    for name, doc in (("pruned", pruned), ("full grid", grid)):
        statuses = [t["status"] for t in doc["treatments"]]
        print(
            f"{name}: engine time {doc['engine_time_s']:.0f} s, {doc['trials']} trials, "
            f"{statuses.count('pruned')} pruned, recommended {doc['recommended']['treatment']}"
        )
    saved = 1 - pruned["engine_time_s"] / grid["engine_time_s"]
    print(
        f"saved {saved:.0%} of the full grid's engine time "
        f"(the pruned tune's own estimate of the grid: {pruned['full_grid_engine_time_s']:.0f} s)"
    )
    if pruned["recommended"]["treatment"] != grid["recommended"]["treatment"]:
        sys.exit("the two tunes recommend different treatments")


if __name__ == "__main__":
    main()
