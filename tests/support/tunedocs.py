"""Hand-made tune documents, built through the tune.json contract.

Eight treatments of max_num_seqs x chunked prefill, each capacity at 100
output tokens per request (throughput per GPU = 100 x capacity, one GPU):

    name  seqs chunked  per user  per GPU  capacity [interval]  status
    A        4 true        40       400    4   [4, 4.5]         measured, worse
    B        8 true        35       700    7   [6.5, 7.5]       measured, noise
    C       16 true        25       900    9   [9, 10]          measured, better
    D       32 true        12       950    9.5 [9, 10.5]        measured, better, recommended
    E        8 false       30       600    6   [5.5, 6.5]       measured, current
    F       16 false       20       850    8.5 [8, open]        measured, better
    G       32 false        -         -    -                    failed
    H        4 false        -         -    - (screened [2, 3])  pruned, worse

By hand, the Pareto front (more of both is better): D (12, 950), C (25, 900),
B (35, 700), A (40, 400); E is dominated by B (35 > 30, 700 > 600) and F by
C (25 > 20, 900 > 850). Ranks by capacity: D, C, F, B, E, A.
"""

from __future__ import annotations

from typing import Any

from slogate.analysis.documents.contracts import Tune
from slogate.analysis.documents.versions import TUNE_SCHEMA

FRONT = ("D", "C", "B", "A")  # by throughput per user, rising
RANKED = ("D", "C", "F", "B", "E", "A")
HOSTILE_SETTING = '"><script>alert(1)</script>'
HOSTILE_COMMAND = "vllm serve m --max-num-seqs 32 '</pre><script>alert(2)</script>'"
HOSTILE_LOG = "\x1b[31mCUDA out of memory\x1b[0m \u202eexe.txt <img src=x onerror=alert(3)>"

# name: seqs, chunked, per user, capacity, lower, upper, rank, vs current
MEASURED: dict[str, tuple[str, str, float, float, float, float | None, int, str | None]] = {
    "A": ("4", "true", 40.0, 4.0, 4.0, 4.5, 6, "worse"),
    "B": ("8", "true", 35.0, 7.0, 6.5, 7.5, 4, "noise"),
    "C": ("16", "true", 25.0, 9.0, 9.0, 10.0, 2, "better"),
    "D": ("32", "true", 12.0, 9.5, 9.0, 10.5, 1, "better"),
    "E": ("8", "false", 30.0, 6.0, 5.5, 6.5, 5, None),
    "F": ("16", "false", 20.0, 8.5, 8.0, None, 3, "better"),
}


def measured(name: str) -> dict[str, Any]:
    seqs, chunked, per_user, value, lower, upper, rank, vs = MEASURED[name]
    return {
        "name": name,
        "settings": {"max_num_seqs": seqs, "enable_chunked_prefill": chunked},
        "status": "measured",
        "current": name == "E",
        "startup_s": 21.5,
        "peak_memory_bytes": 17_300_000_000,
        "engine_time_s": 300.0,
        "screening": {"lower": lower, "upper": upper},
        "capacity": {"value": value, "lower": lower, "upper": upper, "unit": "requests/s",
                     "confirmed": True, "limiting_slo": "chat: ttft_ms p99 <= 500"},
        "throughput": {"output_tokens_per_s": 100 * value, "per_gpu": 100 * value,
                       "per_user": per_user},
        "meets_target": value >= 6,
        "sweep": f"treatments/{name}/sweep",
        "report": f"treatments/{name}/sweep/confirm/report.html",
        "rank": rank,
        "pareto": name in FRONT,
        "vs_current": vs,
    }  # fmt: skip


RECOMMENDED = {
    "treatment": "D",
    "settings": {"max_num_seqs": "32", "enable_chunked_prefill": "true"},
    "command_line": "vllm serve m --max-num-seqs 32 --enable-chunked-prefill",
    "yaml": "max_num_seqs: 32\nenable_chunked_prefill: true\n",
    "runner_up": {"treatment": "C", "comparison": "noise"},  # [9, 10.5] against [9, 10]
}


def tune_doc(treatments: dict[str, dict[str, Any]] | None = None, **changes: Any) -> Tune:
    """The eight treatments above as a finished tune; ``treatments`` update
    treatments by name, ``changes`` replace top-level keys."""
    failed = {
        "name": "G",
        "settings": {"max_num_seqs": "32", "enable_chunked_prefill": "false"},
        "status": "failed",
        "engine_time_s": 40.0,
        "error": "the engine exited with code 1 before it served",
        "log_tail": HOSTILE_LOG,
    }
    pruned = {
        "name": "H",
        "settings": {"max_num_seqs": "4", "enable_chunked_prefill": "false"},
        "status": "pruned",
        "engine_time_s": 60.0,
        "screening": {"lower": 2.0, "upper": 3.0},
        "pruned_reason": "screening bracket [2, 3] below the best's lower bound 9",
        "vs_current": "worse",
    }
    doc = {
        "schema": TUNE_SCHEMA,
        "scenario": "chat.yaml",
        "engine": "vllm",
        "command": "slogate tune chat.yaml --engine vllm --set max_num_seqs=4,8,16,32 "
        "--set enable_chunked_prefill=true,false",
        "started_at": "2026-12-07T20:00:00+00:00",
        "ended_at": "2026-12-07T20:20:00+00:00",
        "finished": True,
        "target": {"mode": "rate", "value": 6, "unit": "requests/s"},
        "factors": [
            {"name": "max_num_seqs", "levels": ["4", "8", "16", "32"]},
            {"name": "enable_chunked_prefill", "levels": ["true", "false"]},
        ],
        "search": {"screen_duration_s": 10.0, "screen_tolerance": 0.25, "duration_s": 30.0,
                   "tolerance": 0.1, "prune": True},
        "current": {"settings": {"max_num_seqs": "8", "enable_chunked_prefill": "false"},
                    "treatment": "E"},
        "treatments": [*(measured(n) for n in "ABCDEF"), failed, pruned],
        "recommended": RECOMMENDED,
        "verdict": "pass",
        "exit_code": 0,
        "headline": "D holds 9.5 requests/s under every SLO, 58% more than the current settings",
        "engine_time_s": 1200.0,
        "full_grid_engine_time_s": 3000.0,
    }  # fmt: skip
    edits = treatments or {}
    doc["treatments"] = [{**t, **edits.get(t["name"], {})} for t in doc["treatments"]]
    return Tune.model_validate({**doc, **changes})
