"""Replicas behind a router are seen with no scenario setting (issue 42 item 3):
the run reads the served-by headers of the routers it documents
(slogate.client.served_by) and says which one it used."""

from __future__ import annotations

from pathlib import Path

import pytest
from loadruns import slogate, summary

from slogate.engines.simulated import Deployment, start_engine

pytestmark = pytest.mark.slow  # an engine process and a load run


def test_the_embedded_routers_replicas_add_up_with_no_scenario_setting(tmp_path: Path) -> None:
    """``slogate engine --replicas 3 --router round-robin``, then ``slogate run
    chat --host`` with the built-in scenario as it is: three replica rows
    whose requests add up to the scenario's (before: none without
    ``request.served_by_header``)."""
    out = tmp_path / "out"
    with start_engine(deployment=Deployment(3, "round-robin")) as engine:
        done = slogate(
            "run", "chat", "--host", engine.url, "--out", str(out),
            "--duration", "8s", "--warmup", "0s", "--processes", "1", timeout=240,
        )  # fmt: skip
    # invalid (3) too where this busy host stalls the generator: the rows are checked here
    assert done.returncode in (0, 1, 3, 4), done.stdout[-2000:] + done.stderr[-3000:]
    doc = summary(out)
    assert doc["run"]["complete"] is True
    block = doc["scenarios"]["chat"]
    assert block["served_by_header"] == "x-served-by"
    replicas = block["replicas"]
    assert sorted(replicas) == ["replica-0", "replica-1", "replica-2"]
    total = block["requests"]["total"]
    assert total >= 9
    assert sum(r["requests"]["total"] for r in replicas.values()) == total
    assert all(r["requests"]["total"] >= total // 3 - 1 for r in replicas.values())  # round robin
    assert block["replicas_note"] is None
    assert "response header <code>x-served-by</code>" in (out / "report.html").read_text()
