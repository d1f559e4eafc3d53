"""The history dashboard of 1,000 runs: the target is under 2 s.

Writes 1,000 run folders, each with a real run's summary.json (one chat
scenario, three SLOs; latencies jittered run to run, one run in 50 slower),
spread over four targets, then times ``write_index`` on them and reports the
page's size.

    .venv/bin/python bench/bench_dashboard.py [--runs 1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from slogate.analysis.documents.summary import build_summary
from slogate.reports import write_index

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from reportdata import realistic_run

TARGET_S = 2.0
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mistral-7b")


def scaled(summary: dict, factor: float) -> dict:
    """The summary with every latency (values and intervals) multiplied by ``factor``."""
    out = copy.deepcopy(summary)
    for block in out["scenarios"].values():
        for stats in block["metrics"].values():
            for key in ("p50", "p90", "p95", "p99", "p999", "max", "mean", "min"):
                if isinstance(stats.get(key), (int, float)):
                    stats[key] *= factor
            for stat, pair in (stats.get("ci") or {}).items():
                stats["ci"][stat] = [None if v is None else v * factor for v in pair]
        for slo in block["slo"]:
            if slo["metric"].endswith("_ms") and slo["value"] is not None:
                slo["value"] *= factor
                slo["ci"] = [None if v is None else v * factor for v in slo["ci"]]
    return out


def make_runs(root: Path, count: int) -> None:
    base = build_summary(realistic_run(n=4000))
    rng = np.random.default_rng(7)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(count):
        factor = float(rng.normal(1.0, 0.02)) * (1.25 if i % 50 == 49 else 1.0)
        summary = scaled(base, factor)
        summary["run"]["run_id"] = f"run-{i:04d}"
        summary["run"]["started_at"] = (start + timedelta(hours=6 * i)).isoformat()
        summary["run"]["engine"] = {"owned_by": "vllm", "model": MODELS[i % len(MODELS)]}
        summary["run"]["git_revision"] = f"{i // 10:07x}"
        folder = root / f"run-{i:04d}"
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps(summary, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--out", help="keep the folders here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        make_runs(root, args.runs)
        size = sum(f.stat().st_size for f in root.glob("*/summary.json"))
        began = time.perf_counter()
        page = write_index(root)
        took = time.perf_counter() - began
        assert page is not None
        kb = page.stat().st_size / 1e3
        print(f"{args.runs} runs ({size / 1e6:.1f} MB of summaries): {page.name} {kb:.0f} kB")
        print(f"write_index: {took:.2f} s (target < {TARGET_S:g} s)")
    return 0 if took < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
