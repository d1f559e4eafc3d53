"""What a run against a real engine that times its requests must show: every
request's TTFT taken apart, the engine's part inside the client's TTFT within
the client's stated error, and the split's percentiles in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROUNDING_MS = 1e-5  # requests.jsonl keeps milliseconds to 6 decimals
LABELS = ("TTFT outside the engine", "TTFT in the engine&#39;s prefill")
QUEUE_LABEL = "TTFT in the engine&#39;s queue"


def check_split(out: Path, scenario: str, queue_reported: bool) -> list[dict[str, Any]]:
    """The run's successful requests (warm-up included), each checked: its split sums to its TTFT,
    its queue is there exactly when the engine reports one, and the engine's
    queue and prefill exceed the client's TTFT by no more than the run's
    stated TTFT error (the worst read delay of its loop)."""
    summary = json.loads((out / "summary.json").read_text())
    bound = summary["generator"]["error_bound_ms"]["ttft_ms"]["max"] or 0.0
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    ok = [x for x in lines if x["ok"]]
    for x in ok:
        split = x["ttft_split_ms"]
        assert split is not None, x
        assert (split["queue"] is not None) is queue_reported, x
        assert split["prefill"] > 0 and (split["queue"] or 0.0) >= 0, x
        assert split["outside"] >= -bound, (x, bound)
        total = split["outside"] + (split["queue"] or 0.0) + split["prefill"]
        assert abs(total - x["ttft_ms"]) <= ROUNDING_MS, x
    measured = [x for x in ok if not x["warmup"]]
    metrics = summary["scenarios"][scenario]["metrics"]
    assert metrics["ttft_prefill_ms"]["count"] == metrics["ttft_ms"]["count"] == len(measured)
    assert ("ttft_queue_ms" in metrics) is queue_reported
    html = (out / "report.html").read_text()
    for label in (*LABELS, QUEUE_LABEL) if queue_reported else LABELS:
        assert label in html
    return ok
