"""The headless status line: what a person watching a run sees every few seconds."""

from __future__ import annotations

import time
from pathlib import Path

import scenarios
from analysis.records import RequestRecord
from locustfiles.context import LoadContext
from locustfiles.engine_info import EngineInfo
from locustfiles.session import RunSession

MS = 1_000_000


def request(pairs_read_together: int = 0) -> RequestRecord:
    """32 chunks 20 ms apart; ``pairs_read_together`` times a chunk stamped with
    the next one's instant, as a late reader sees it."""
    start = 1_000 * MS
    chunks = [start + 50 * MS + i * 20 * MS for i in range(32)]
    for i in range(1, 2 * pairs_read_together, 2):
        chunks[i] = chunks[i + 1]
    return RequestRecord(
        scenario="exact-chat",
        start_ns=start,
        end_ns=chunks[-1] + MS,
        chunk_ns=chunks,
        chunk_chars=[4] * 32,
        output_tokens=32,
        finish_reason="length",
    )


def session(tmp_path: Path) -> RunSession:
    loaded = scenarios.load("tests/data/exact-chat.yaml")
    origin = time.time()
    ctx = LoadContext(loaded, "http://127.0.0.1:9", "m", seed=1, shards=1, window_s=5.0,
                      origin_s=origin)  # fmt: skip
    run = RunSession(ctx, EngineInfo("m", "test", ("m",)), tmp_path, host=ctx.host,
                     command="test", max_lag_ms=50.0)  # fmt: skip
    run.start(origin)
    return run


def test_status_line_warns_while_chunks_are_read_together(tmp_path: Path) -> None:
    run = session(tmp_path)
    for _ in range(8):
        run.collector.record(request(), wall_s=time.time())
    line = run.status_line()
    assert line.startswith("[slogate]") and "exact-chat:" in line and "TTFT p99 50 ms" in line
    assert "read together" not in line
    for _ in range(2):  # 6 of 310 gaps (1.9%) now 0
        run.collector.record(request(pairs_read_together=3), wall_s=time.time())
    assert "chunks read together 1.9% (ITL blurred)" in run.status_line()
