"""A nightly series of saved runs in a results root, for history and its dashboard."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from reportdata import realistic_run

from slogate.analysis.documents.summary import build_summary


def night(root: Path, i: int, scale: float = 1.0, model: str = "test-model") -> Path:
    """A saved run (data and summary.json): night ``i`` of a nightly series."""
    run = realistic_run(n=4000, seed=100 + i, scale=scale)
    run.meta["run_id"] = f"night-{i:02d}"
    run.meta["started_at"] = (
        datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=i)
    ).isoformat()
    run.meta["engine"] = {"owned_by": "vllm", "model": model}
    run.meta["git_revision"] = f"rev{i % 3}"
    folder = root / f"night-{i:02d}"
    run.save(folder)
    (folder / "summary.json").write_text(json.dumps(build_summary(run)))
    return folder
