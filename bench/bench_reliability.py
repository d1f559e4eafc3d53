"""The reliability suite's long cases: every misbehaving server of
slogate.exactengine.misbehave x both load models, each a real ``slogate run``.

    .venv/bin/python bench/bench_reliability.py [--duration 10] [--faults ...] [--models ...]

Each run uses 4 users (closed loop) or 4 requests/s (open loop; ``--rps``:
``--faults new-replica --models open --rps 150`` names 150 replicas a
second), timeouts first_token 3 s and stall 2 s, and is checked for what
docs/reliability.md promises:

- it ends within duration + the largest timeout + 10 s (plus start-up);
- peak RSS of slogate and all its children stays under ``--rss-mb`` (800 MB),
  and under 300 MB for the faults of hostile values (RSS_MB);
- every request the server answered is accounted: ok + failed by kind +
  cancelled at stop >= served (the server also counts models-list probes
  and requests whose connection was refused before a record existed, never
  more) and ok + failed + cancelled <= sent;
- the exit code is the documented one (3 for every fault but clock-jump,
  whose output is valid) and stderr has no traceback.

It prints one row per run and exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

from slogate.exactengine.misbehave import FAULTS, MisbehavingServer

ROOT = Path(__file__).resolve().parent.parent
MODELS = {
    "closed": {"users": 4, "spawn_rate": 4},
    "open": {"rate": {"rps": 4, "arrival": "poisson"}},
}
TIMEOUTS = {"connect": "3s", "first_token": "3s", "stall": "2s"}
LARGEST_TIMEOUT_S = 3.0
STARTUP_S = 20.0  # interpreter, Locust and discovery on a loaded 2-core machine
# None: any verdict (the output is valid); every other fault: 3
EXPECTED_EXIT = {"clock-jump": None, "new-replica": None, "hostile-served-by": None}
# what a hostile value must not grow past, whatever --rss-mb says (issue 42 item 4)
RSS_MB = {
    "new-replica": 300.0,
    "huge-usage": 300.0,
    "slow-loris": 300.0,
    "hostile-served-by": 300.0,
}


def scenario(folder: Path, model: str, duration: float, rps: float) -> Path:
    load = MODELS[model] if model == "closed" else {"rate": {"rps": rps, "arrival": "poisson"}}
    doc = {
        "name": "reliability",
        "workload": {"kind": "chat", "input_tokens": 64, "output_tokens": 16, "turns": 1},
        "load": {**load, "duration": f"{duration}s"},
        "timeouts": TIMEOUTS,
        "request": {"ignore_eos": True},
        "slo": {"error_rate": {"max": 0.01}},
    }
    path = folder / f"{model}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def one(fault: str, model: str, duration: float, rps: float, folder: Path) -> dict:
    out = folder / f"{fault}-{model}"
    with MisbehavingServer(fault) as server:
        command = [
            sys.executable,
            "-m",
            "slogate.cli",
            "run",
            str(scenario(folder, model, duration, rps)),
        ]
        command += ["--host", server.url, "--out", str(out)]
        start = time.monotonic()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        watched = psutil.Process(process.pid)
        peak = 0
        while process.poll() is None:
            with contextlib.suppress(psutil.Error):
                peak = max(peak, tree_rss(watched))
            time.sleep(0.2)
        took = time.monotonic() - start
        _, stderr = process.communicate()
        served = server.served
    requests, cancelled = {}, 0
    if (out / "summary.json").is_file():
        summary = json.loads((out / "summary.json").read_text())
        requests = summary["scenarios"]["reliability"]["requests"]
        cancelled = summary["run"].get("cancelled_at_stop") or 0
    accounted = requests.get("ok", 0) + requests.get("failed", 0) + cancelled
    expected = EXPECTED_EXIT.get(fault, 3)
    return {
        "fault": fault,
        "model": model,
        "exit": process.returncode,
        "took_s": round(took, 1),
        "peak_rss_mb": round(peak / 2**20),
        "served": served,
        "accounted": accounted,
        "errors": dict(requests.get("errors", {})),
        "checks": {
            "on_time": took <= duration + LARGEST_TIMEOUT_S + 10 + STARTUP_S,
            "exit_code": expected is None or process.returncode == expected,
            "no_traceback": "Traceback" not in stderr,
            # the server also counts the pre-flight's route probe, a POST
            "accounted": accounted >= served - 1 > 0,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--faults", nargs="+", default=sorted(set(FAULTS) - {"echo-auth"}))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rps", type=float, default=4.0, help="the open loop's rate")
    parser.add_argument("--rss-mb", type=float, default=800.0)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        for fault in args.faults:
            for model in args.models:
                row = one(fault, model, args.duration, args.rps, Path(folder))
                row["checks"]["rss"] = row["peak_rss_mb"] <= RSS_MB.get(fault, args.rss_mb)
                bad = [name for name, ok in row["checks"].items() if not ok]
                failed |= bool(bad)
                print(
                    f"{fault:16} {model:6} exit {row['exit']}  {row['took_s']:5.1f} s  "
                    f"{row['peak_rss_mb']:4d} MB  served {row['served']:4d}  "
                    f"accounted {row['accounted']:4d}  {row['errors']}  "
                    + ("ok" if not bad else "FAILED " + ", ".join(bad)),
                    flush=True,
                )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
