"""The history of a results root: the dashboard's trends and regression flags,
``--baseline auto``'s choice, retention, and never overwriting a foreign index."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from nights import night
from reportdata import realistic_run

from slogate.analysis.documents.contracts import Summary, parse
from slogate.analysis.documents.history import (
    PastRun,
    auto_baseline,
    read_runs,
    regressions_between,
    results_folder,
    runs_to_prune,
)
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.summary import build_summary
from slogate.analysis.verdict.generator import ProcessHealth
from slogate.cli import main
from slogate.reports import write_index, write_results
from slogate.reports.index import FALLBACK_FILE

PLANTED = 17  # the night whose latencies are 20% higher


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    for i in range(30):
        night(root, i, scale=1.2 if i == PLANTED else 1.0)
    for i in range(3):  # another target: never compared with the first
        night(root, 40 + i, scale=3.0 if i == 1 else 1.0, model="other-model")
    return root


@pytest.mark.slow
def test_the_dashboard_flags_exactly_the_planted_regression(nights: Path) -> None:
    page = write_index(nights).read_text()
    table = page[page.index('<table id="runs">') :]
    flagged = re.findall(r'<tr class="regression"[^>]*>\s*<td class="nw"><a href="([^"/]+)/', table)
    assert flagged == ["night-41", f"night-{PLANTED:02d}"]  # newest first
    row = table[table.index(f">night-{PLANTED:02d}<") :].split("</tr>")[0]
    assert "ttft_ms p99 +" in row and f"vs night-{PLANTED - 1:02d}" in row
    assert page.count('class="mk regression"') >= 2  # on the charts too
    assert "1 regression against the run before" in page
    assert page.count('<section class="series"') == 2
    assert page.count('class="band"') == 2 * 3  # a CI band on each SLO chart
    assert "threshold 2000 ms" in page


@pytest.mark.slow
def test_baseline_auto_finds_the_night_before_and_the_gate_fails(
    nights: Path, tmp_path: Path
) -> None:
    planted = nights / f"night-{PLANTED:02d}"
    base = auto_baseline(nights, ["chat"], "vllm", "test-model", exclude=planted)
    assert base == nights / "night-29"  # the newest other one
    runs = [r for r in read_runs(nights) if r.folder.name < planted.name]
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for r in runs[-2:]:
        (earlier / r.folder.name).symlink_to(r.folder)
    found = auto_baseline(earlier, ["chat"], "vllm", "test-model")
    assert found == earlier / f"night-{PLANTED - 1:02d}"
    assert auto_baseline(earlier, ["chat"], "vllm", "unknown-model") is None
    outcome = write_results(tmp_path / "new", RunData.load(planted), RunData.load(found))
    assert outcome.verdict == "pass" and outcome.exit_code == 1
    markdown = (tmp_path / "new" / "summary.md").read_text()
    assert f"Against baseline **night-{PLANTED - 1:02d}**: regression" in markdown


@pytest.mark.slow
def test_runs_to_prune_keeps_the_newest_of_each_target_and_drops_old_ones(nights: Path) -> None:
    runs = read_runs(nights)
    now = datetime(2026, 2, 1, tzinfo=timezone.utc)
    kept_two = {r.folder.name for r in runs} - {
        r.folder.name for r in runs_to_prune(runs, 2, None, now)
    }
    assert kept_two == {"night-28", "night-29", "night-41", "night-42"}
    old = {r.folder.name for r in runs_to_prune(runs, None, timedelta(days=5), now)}
    assert old == {f"night-{i:02d}" for i in range(26)}


def test_a_foreign_index_is_never_overwritten(tmp_path: Path) -> None:
    write_results(tmp_path / "run", realistic_run(n=500))
    (tmp_path / "index.html").write_text("<h1>my own page</h1>")
    written = write_index(tmp_path)
    assert written == tmp_path / FALLBACK_FILE
    assert (tmp_path / "index.html").read_text() == "<h1>my own page</h1>"
    assert write_index(tmp_path) == written  # its own file it rewrites
    (tmp_path / FALLBACK_FILE).write_text("also mine")
    assert write_index(tmp_path) is None
    assert (tmp_path / FALLBACK_FILE).read_text() == "also mine"


def test_results_folders_sort_by_time_unless_the_user_names_one(tmp_path: Path) -> None:
    folder = results_folder("sweep-chat")
    assert folder.parent == Path("results")
    assert re.fullmatch(r"\d{8}-\d{6}-sweep-chat", folder.name)
    assert results_folder("chat", tmp_path / "mine") == tmp_path / "mine"


def busy_night(i: int, scale: float, stall_ms: float | None) -> RunData:
    """Night ``i``, its latencies times ``scale``; with ``stall_ms`` its load loop
    was held that long for 10% of its time (a busy runner)."""
    run = realistic_run(n=4000, seed=100 + i, scale=scale)
    if stall_ms is not None:
        health = ProcessHealth(pid=1)
        health.stall.record_value(100, 9000)
        health.stall.record_value(int(stall_ms * 1000), 1000)
        run.meta["generator"]["health"] = {"local": health.to_dict()}
    return run


def test_a_change_within_the_generators_error_is_no_regression_on_the_dashboard(
    tmp_path: Path,
) -> None:
    """The dashboard's rule is slogate compare's: night 1 is 20% slower (E2E p99
    about +900 ms), but its load loop was held 5 s for 10% of its time."""

    def past(i: int, scale: float, stall_ms: float | None) -> PastRun:
        run = busy_night(i, scale, stall_ms)
        return PastRun(tmp_path / f"night-{i}", parse(Summary, build_summary(run), "summary"))

    quiet, slower = past(0, 1.0, None), past(1, 1.2, None)
    flagged = {(r.metric, r.stat) for r in regressions_between(quiet, slower, "chat")}
    assert {("ttft_ms", "p95"), ("e2e_ms", "p99")} <= flagged
    held = past(1, 1.2, stall_ms=5000.0)
    assert regressions_between(quiet, held, "chat") == []


def test_the_busy_runner_gate_cannot_tell_and_exits_3_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dashboard's busy night through the gate: E2E p99 rose 20% (about +900 ms)
    within the runner's 5 s error, so neither `slogate compare` nor `--baseline`
    may pass it silently: exit 3 with the reason, 0 with --allow-uncertain."""
    quiet = tmp_path / "quiet"
    busy_night(0, 1.0, None).save(quiet)
    held = tmp_path / "held"
    busy_night(1, 1.2, stall_ms=5000.0).save(held)
    assert main(["compare", str(quiet), str(held)]) == 3
    out = capsys.readouterr().out
    assert out.startswith("CANNOT TELL: 0 regression(s)")
    assert re.search(r"chat e2e_ms p99 .* \+\d+\.\d%  CANNOT-TELL \(within the generators' ±", out)
    page = (held / "comparison.html").read_text()
    assert '<tr class="cannot-tell">' in page and "exit 3; --allow-uncertain" in page
    assert main(["compare", str(quiet), str(held), "--allow-uncertain"]) == 0
    assert capsys.readouterr().out.startswith("NO REGRESSION: 0 regression(s)")

    # through --baseline: the busy night's own SLOs are not trusted either (exit 3
    # as invalid), and its outputs show which gated rises the gate could not judge
    gated = write_results(tmp_path / "gated", RunData.load(held), RunData.load(quiet))
    assert (gated.verdict, gated.exit_code) == ("invalid", 3)
    assert gated.summary["baseline"]["verdict"] == "cannot tell"
    markdown = (tmp_path / "gated" / "summary.md").read_text()
    assert re.search(r"\| chat \| e2e\\_ms p99 \|.*\| cannot tell \|", markdown)
    metrics = (tmp_path / "gated" / "metrics.prom").read_text()
    assert re.search(r"slogate_cannot_tell\{[^}]*scenario=\"chat\"[^}]*\} [1-9]", metrics)
    report = (tmp_path / "gated" / "report.html").read_text()
    assert ": cannot tell</b>" in report and '<tr class="cannot-tell">' in report
