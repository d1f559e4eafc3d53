"""Reliability against hostile routers and usage (issue 42 N1, N2, N3, N10):
whole runs against the misbehaving servers of slogate.exactengine.misbehave on
127.0.0.1, each ending by the contract of docs/reliability.md: one clear
outcome, the right exit code, no traceback, nothing measured lost, on time."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest
from loadruns import scenario_file, slogate, summary

from slogate.analysis.documents.neutral import NEUTRALISED
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.recorder import MAX_REPLICAS, OTHER_REPLICAS, REPLICA
from slogate.client.openai_stream import MAX_USAGE_TOKENS
from slogate.exactengine.misbehave import MisbehavingServer

pytestmark = pytest.mark.slow


def run_against(tmp_path: Path, kind: str, duration: str, users: int = 4):
    """``slogate run`` of a chat load against fault ``kind``: its process, the
    seconds it took, the requests the server answered, and the results folder."""
    scenario = scenario_file(
        tmp_path,
        "exact-chat",
        load={"users": users, "spawn_rate": users, "duration": duration},
        timeouts={"connect": "3s", "first_token": "3s", "stall": "2s"},
    )
    out = tmp_path / "out"
    with MisbehavingServer(kind) as server:
        start = time.monotonic()
        done = slogate("run", str(scenario), "--host", server.url, "--out", str(out), timeout=180)
        took = time.monotonic() - start
    return done, took, server.served, out


def test_a_slow_loris_holds_the_preflight_no_longer_than_its_deadline(tmp_path: Path) -> None:
    """Headers a byte a second: every read gets its byte in time. The route
    probe gives up after its 2 s as a whole (before: 95 s, the run 107 s), and
    the load's requests time out at their first-token deadline."""
    done, took, served, out = run_against(tmp_path, "slow-loris", "6s")
    assert done.returncode == 3, done.stderr[-2000:]  # nothing was answered: nothing measured
    assert "Traceback" not in done.stderr
    assert took < 6 + 2 + 3 + 10 + 15  # duration, probe, first token, 10 s, start-up
    requests = summary(out)["scenarios"]["exact-chat"]["requests"]
    assert requests["errors"] == {"timeout_first_token": requests["failed"]}
    assert requests["failed"] >= 4 and served > requests["failed"]  # the probe's was one more


def test_a_router_naming_a_new_replica_per_reply_keeps_bounded_rows(tmp_path: Path) -> None:
    """Every reply names a replica never seen: the first MAX_REPLICAS keep rows
    of their own, the rest share one, the rows add up to every request, and
    the summary says so (before: a bucket per name, 4.5 MB each)."""
    done, _, served, out = run_against(tmp_path, "new-replica", "5s", users=8)
    assert done.returncode in (0, 1, 4), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    block = summary(out)["scenarios"]["exact-chat"]
    replicas = block["replicas"]
    total = block["requests"]["total"]
    assert total > MAX_REPLICAS * 2, total  # enough names to fold
    assert len(replicas) == MAX_REPLICAS + 1
    assert replicas[OTHER_REPLICAS]["requests"]["total"] == total - MAX_REPLICAS
    assert sum(r["requests"]["total"] for r in replicas.values()) == total
    assert str(MAX_REPLICAS) in block["replicas_note"]
    assert "share the row" in (out / "report.html").read_text()
    assert block["served_by_header"] == "x-served-by"
    spans = {span for _, span in RunData.load(out).buckets if span.startswith(REPLICA)}
    assert len(spans) == MAX_REPLICAS + 1
    rows = list(csv.DictReader(io.StringIO((out / "timeseries.csv").read_text())))
    assert len({r["replica"] for r in rows if r["replica"]}) <= MAX_REPLICAS + 1
    assert served >= total


def test_a_usage_count_of_2_to_the_62_fails_that_request_and_the_run_keeps_the_rest(
    tmp_path: Path,
) -> None:
    """Usage of 2^62 prompt and cached tokens (before: the journal's save
    broke, exit 3, no summary, every measured request lost). Each such reply
    is a protocol error naming the field; the run is judged and saved whole."""
    done, _, served, out = run_against(tmp_path, "huge-usage", "4s")
    assert done.returncode == 3, done.stderr[-2000:]  # every request failed
    assert "Traceback" not in done.stderr
    requests = summary(out)["scenarios"]["exact-chat"]["requests"]
    assert requests["errors"] == {"protocol": requests["total"]}
    assert requests["total"] >= served - 4 > 0  # all but those cut at the stop
    (sample,) = set(requests["error_samples"]["protocol"])
    assert f"usage prompt_tokens is {1 << 62}" in sample and str(MAX_USAGE_TOKENS) in sample
    assert (out / "report.html").is_file()
    report = slogate("report", str(out))
    assert report.returncode == 3 and "Traceback" not in report.stderr


def test_hostile_replica_names_are_neutral_in_every_output(tmp_path: Path) -> None:
    """A spreadsheet formula, a UTF-8 name and a raw C1 control as replica
    names: read as UTF-8, no control character in any file the run writes,
    and no CSV cell a spreadsheet would take for a formula."""
    done, _, _, out = run_against(tmp_path, "hostile-served-by", "4s")
    assert done.returncode in (0, 1, 4), done.stderr[-2000:]
    replicas = summary(out)["scenarios"]["exact-chat"]["replicas"]
    assert set(replicas) == {
        '=HYPERLINK("http://evil.example/x","click")',
        "répliqué-ü",
        "c1\ufffd31mred",
    }
    for path in out.iterdir():
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not NEUTRALISED & set(text) - {"\r"}, path.name
            assert "rÃ©pliquÃ" not in text, path.name  # never Latin-1-decoded UTF-8
    for name in ("timeseries.csv", "percentiles.csv"):
        for row in csv.reader(io.StringIO((out / name).read_text())):
            assert not [cell for cell in row if cell.startswith(("=", "+", "@"))], row
    cells = {
        r["replica"] for r in csv.DictReader(io.StringIO((out / "timeseries.csv").read_text()))
    }
    assert '\'=HYPERLINK("http://evil.example/x","click")' in cells
    assert "répliqué-ü" in cells
