"""The report's latency table shows TTFT taken apart: a row for outside,
queue and prefill each, with the percentiles of their hand-built samples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from reportdata import bucket, run_of

from slogate.reports.html import num
from slogate.reports.results import write_results

# 100 requests: outside 1..100 ms, queue 10x, prefill 100x that
OUTSIDE = [float(i) for i in range(1, 101)]
SAMPLES = {
    "ttft": [111.0 * x for x in OUTSIDE],
    "e2e": [111.0 * x + 500 for x in OUTSIDE],
    "ttft_outside": OUTSIDE,
    "ttft_queue": [10.0 * x for x in OUTSIDE],
    "ttft_prefill": [100.0 * x for x in OUTSIDE],
}
ROWS = {
    "ttft_outside_ms": "TTFT outside the engine (network, HTTP, front end, uncounted waits)",
    "ttft_queue_ms": "TTFT in the engine&#39;s queue",
    "ttft_prefill_ms": "TTFT in the engine&#39;s prefill",
}


def row(html: str, label: str) -> list[str]:
    """The cells of the latency table row whose first cell is ``label``."""
    found = re.search(rf"<td>{re.escape(label)}</td>(.*?)</tr>", html, re.S)
    assert found, label
    return re.findall(r"<td[^>]*>([^<]*)</td>", found.group(1))


def test_the_report_shows_the_splits_percentiles(tmp_path: Path) -> None:
    outcome = write_results(tmp_path, run_of({"chat": bucket(SAMPLES)}))
    metrics = outcome.summary["scenarios"]["chat"]["metrics"]
    html = (tmp_path / "report.html").read_text()
    for name, scale in (("ttft_outside_ms", 1), ("ttft_queue_ms", 10), ("ttft_prefill_ms", 100)):
        d = metrics[name]
        # the samples' own percentiles, within HDR's 3 significant digits
        for key, rank in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            assert d[key] == pytest.approx(scale * rank, rel=1e-3), (name, key)
        shown = [num(d["count"]), *(num(d[k]) for k in ("p50", "p90", "p95", "p99"))]
        assert row(html, ROWS[name])[:5] == shown, name
