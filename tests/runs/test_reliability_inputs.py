"""Reliability of what slogate reads and writes: bad files and flags exit 2 with
one line (never a traceback, never 1), limits, results folders that cannot be
written or are malformed, foreign index pages, bidi text (docs/reliability.md)."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest
import yaml
from loadruns import cli, locust_command, scenario_file, slogate, summary
from mounts import in_own_mounts
from reportdata import bucket, run_of
from scenario_cases import HOSTILE, LIMITS

from slogate.analysis.documents.neutral import NEUTRALISED, neutralise_logs
from slogate.engines.exact import ExactEngine
from slogate.exactengine.misbehave import MisbehavingServer
from slogate.reports import write_index, write_results
from slogate.reports.crashlog import crash_line
from slogate.reports.terminal import verdict_table


def check(tmp_path: Path, text: str, name: str = "s.yaml"):
    """``slogate scenario check`` of ``text``, in this process (the same main,
    exit code and output; the real process is checked once below)."""
    path = tmp_path / name
    path.write_text(text)
    return cli("scenario", "check", str(path))


@pytest.mark.parametrize(("text", "says"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_scenario_files_are_configuration_errors(
    tmp_path: Path, text: str, says: str
) -> None:
    done = check(tmp_path, text)
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_empty_scenario_file_exits_2_from_the_installed_command(tmp_path: Path) -> None:
    """The real process: an empty file once raised AttributeError, exit 1."""
    (tmp_path / "s.yaml").write_text("")
    done = slogate("scenario", "check", str(tmp_path / "s.yaml"), timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().endswith("got an empty file")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_secret_file_given_as_a_scenario_is_not_echoed(tmp_path: Path) -> None:
    done = check(tmp_path, "OPENAI_API_KEY=sk-live-0123456789abcdef\n", name=".env")
    assert done.returncode == 2
    assert "0123456789abcdef" not in done.stderr
    assert "got a YAML str" in done.stderr


@pytest.mark.parametrize(("changes", "key", "says"), LIMITS.values(), ids=LIMITS.keys())
def test_limits_are_checked_by_scenario_check(
    tmp_path: Path, changes: dict, key: str, says: str
) -> None:
    done = cli("scenario", "check", str(scenario_file(tmp_path, "exact-chat", **changes)))
    assert done.returncode == 2, done.stderr
    assert key in done.stderr and says in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--spawn-rate", "1e6"), "load.spawn_rate"),
        (("--users", "1000000000"), "load.users"),
        (("--processes", "-3"), "--processes: expected an integer from 1 to 1024"),
        (("--seed", "-1"), "--seed: expected an integer >= 0"),
        (("--master", "--expect-workers", "0"), "--expect-workers: expected an integer >= 1"),
        (("--master", "--master-bind-port", "70000"), "--master-bind-port: expected a port"),
    ],
)
def test_limits_and_bad_values_at_the_command_line(args: tuple[str, ...], says: str) -> None:
    done = cli("run", "tests/data/exact-chat.yaml", "--host", "http://127.0.0.1:9", *args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_sample_refuses_a_negative_seed() -> None:
    done = cli("scenario", "sample", "chat", "-n", "1", "--seed", "-1")
    assert done.returncode == 2
    assert "--seed: expected an integer >= 0" in done.stderr


def test_trace_token_counts_beyond_the_limit_are_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("t,in,out\n0,100,10\n1,1e30,10\n")
    scenario = tmp_path / "trace.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "workload": {
                    "kind": "trace",
                    "file": str(trace),
                    "columns": {"time": "t", "input_tokens": "in", "output_tokens": "out"},
                },
                "load": {"duration": "5s"},
            }
        )
    )
    done = cli("scenario", "check", str(scenario))
    assert done.returncode == 2, done.stderr
    assert "line 3, field 'in': '1e30' is beyond the limit of 2097152" in done.stderr


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_on_malformed_data_exit_2(tmp_path: Path, command: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "run.json").write_text("[]")
    args = (str(tmp_path),) if command == "report" else (str(tmp_path), str(tmp_path))
    done = cli(command, *args)
    assert done.returncode == 2, done.stderr
    assert "run.json" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_an_unexpected_failure_after_the_load_exits_3_with_a_log(tmp_path: Path) -> None:
    """report.html cannot be written (a folder is in its way): exit 3, one line
    naming the log with the traceback, and no report.html.tmp left behind."""
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)
    (out / "report.html" / "keep").write_text("x")
    scenario = scenario_file(
        tmp_path, "exact-chat", load={"users": 1, "spawn_rate": 1, "duration": "2s"}
    )
    with MisbehavingServer("clock-jump") as server:
        done = slogate("run", str(scenario), "--host", server.url, "--out", str(out), timeout=120)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "run failed: IsADirectoryError" in done.stderr
    assert "Traceback" not in done.stderr
    logs = list(out.glob("slogate-error-*.log"))
    assert len(logs) == 1 and "Traceback" in logs[0].read_text()
    assert not (out / "report.html.tmp").exists()


def test_the_index_lists_malformed_neighbours_and_keeps_a_foreign_index(tmp_path: Path) -> None:
    for name, text in {
        "broken-scenarios": json.dumps({"scenarios": {"chat": []}}),
        "broken-run": json.dumps({"run": "yesterday", "scenarios": {}}),
        "broken-worst": json.dumps({"scenarios": {}, "worst_slo": {"scenario": 1}}),
        "deep": "[" * 100_000 + "]" * 100_000,
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(text)
    write_results(tmp_path / "good", run_of({"chat": bucket({"ttft": [10.0], "e2e": [20.0]})}))
    page = write_index(tmp_path).read_text()
    assert "Unreadable summary.json in: broken-run, broken-scenarios, broken-worst, deep" in page
    assert "good/report.html" in page

    foreign = tmp_path / "site"
    (foreign / "run").mkdir(parents=True)
    (foreign / "index.html").write_text("<html>my site</html>")
    assert write_index(foreign) == foreign / "slogate-index.html"  # beside it, never over it
    assert (foreign / "index.html").read_text() == "<html>my site</html>"


HOSTILE = {
    "right-to-left override": "\u202e",
    "left-to-right isolate": "\u2066",
    "right-to-left mark": "\u200f",
    "an ESC sequence that clears the terminal": "\x1b[2J\x1b[31m",
    "a one-byte CSI (C1)": "\x9b31m",
    "a carriage return": "\r",
    "NUL": "\x00",
    "BEL": "\x07",
    "DEL": "\x7f",
}


def test_server_text_is_neutralised_in_every_output(tmp_path: Path) -> None:
    """One server string with every hostile character goes through every text
    output: the terminal, Markdown, JUnit, metrics labels, HTML and the crash
    line; each shows the text and none keeps a control or bidi character."""
    evil = "model " + "".join(HOSTILE.values()) + " exe.txt done"
    run = run_of(
        {"chat": bucket({"ttft": [10.0], "e2e": [20.0]}, error_samples={"http_5xx": [evil]})},
        engine={"owned_by": evil, "model": evil},
        complete=False,
        incomplete_reason=evil,
    )
    outcome = write_results(tmp_path / "r", run)
    files = {name: outcome.files[name] for name in ("report", "markdown", "junit", "metrics")}
    outputs = {name: path.read_text(encoding="utf-8") for name, path in files.items()}
    outputs["terminal"] = verdict_table(outcome.summary, evil)
    outputs["crash line"] = crash_line(RuntimeError(evil), None)
    controls = {c for text in HOSTILE.values() for c in text if not c.isprintable()}
    assert controls <= NEUTRALISED and len(controls) == 9
    for name, text in outputs.items():
        assert "exe.txt done" in text, name  # the text is shown: only its controls are not
        kept = sorted(f"U+{ord(c):04X}" for c in set(text) & controls)
        assert not kept, f"{name} keeps {kept}"


def test_server_text_is_neutralised_in_every_log_line() -> None:
    """A load process's log lines (slogate's and Locust's, a traceback's
    included) pass through the same neutralising as every other output."""
    evil = "model " + "".join(HOSTILE.values()) + " exe.txt done"
    stream = io.StringIO()
    logger = logging.getLogger("test-neutral-log")
    logger.addHandler(logging.StreamHandler(stream))
    logger.propagate = False
    neutralise_logs(logger)
    neutralise_logs(logger)  # once is enough: a second call adds nothing
    assert len(logger.handlers[0].filters) == 1
    logger.error("slogate: %s", evil)
    try:
        raise RuntimeError(evil)
    except RuntimeError:
        logger.exception("a user failed")
    text = stream.getvalue()
    assert text.count("exe.txt done") == 2  # the line, and the traceback's last line
    controls = {c for s in HOSTILE.values() for c in s if not c.isprintable()}
    assert not set(text) & controls


@pytest.mark.slow
def test_a_builtin_scenario_runs_shorter_than_its_warmup_with_warmup(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with MisbehavingServer("clock-jump") as server:
        done = slogate(
            "run", "chat", "--host", server.url, "--users", "2", "--duration", "3s",
            "--warmup", "1s", "--out", str(out), timeout=120,
        )  # fmt: skip
    assert done.returncode != 2, done.stderr[-2000:]
    assert summary(out)["run"]["measured_s"] <= 2.5


@pytest.mark.slow
@pytest.mark.parametrize("command", ["slogate run", "plain locust"])
def test_an_unwritable_results_folder_stops_the_run_before_any_load(
    tmp_path: Path, command: str
) -> None:
    """An existing --out on a read-only file system: exit 2 and one line naming
    the folder and the reason, and the engine never receives a request."""
    out = tmp_path / "out"
    out.mkdir()
    with ExactEngine({"ttft_ms": 5, "itl_ms": 1}) as engine:
        flags = ["--host", engine.url, "--out", str(out)]
        if command == "slogate run":
            argv = [sys.executable, "-m", "slogate.cli", "run", "tests/data/exact-chat.yaml"]
        else:
            argv = locust_command(
                "--headless", "-t", "3s", "--scenario", "tests/data/exact-chat.yaml"
            )
        done = in_own_mounts(f"mount -t tmpfs -o ro tmpfs {out}", [*argv, *flags])
        assert engine.truth() == []
    assert done.returncode == 2, done.stderr[-2000:]
    line = f"slogate: --out {out}: cannot write the results folder: Read-only file system"
    errors = [text for text in done.stderr.splitlines() if "slogate:" in text]
    assert len(errors) == 1 and errors[0].endswith(line), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_report_keeps_the_exit_code_contract_on_a_full_disk(tmp_path: Path) -> None:
    """Re-rendering a sound results folder on a full file system is a failed
    command (exit 3, the path and a log with the traceback), not bad
    configuration; and the full disk keeps no empty log of it."""
    sound = tmp_path / "sound"
    run = run_of({"chat": bucket({"ttft": [10.0], "e2e": [20.0]})})
    run.save(sound)
    write_results(sound, run)
    disk, logs = tmp_path / "disk", tmp_path / "logs"
    disk.mkdir()
    logs.mkdir()
    fill = f"dd if=/dev/zero of={disk}/fill bs=64k 2>/dev/null || true"
    setup = f"mount -t tmpfs -o size=4m tmpfs {disk}\ncp -r {sound} {disk}/run\n{fill}"
    done = in_own_mounts(
        setup,
        [sys.executable, "-m", "slogate.cli", "report", f"{disk}/run"],
        after=f"ls {disk}/run",
        SLOGATE_LOG_DIR=str(logs),
    )
    assert "slogate-error" not in done.stdout  # the full disk took the name, not the text
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stderr.startswith("slogate report: run failed: OSError: [Errno 28] ")
    assert f"{disk}/run/" in done.stderr and f"(traceback in {logs}/slogate-error-" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    (log,) = logs.glob("slogate-error-*.log")
    assert "Traceback" in log.read_text() and "No space left on device" in log.read_text()


@pytest.mark.slow
def test_a_scenario_check_rejects_is_rejected_by_run_whatever_the_flags(tmp_path: Path) -> None:
    """One file, one verdict: the file is validated before a flag overrides its key."""
    scenario = scenario_file(tmp_path, "exact-chat", load={"duration": "abc"})
    checked = cli("scenario", "check", str(scenario))
    assert checked.returncode == 2
    assert "load.duration" in checked.stderr and "'abc'" in checked.stderr
    run = slogate("run", str(scenario), "--duration", "2s", "--out", str(tmp_path / "out"))
    assert run.returncode == 2, run.stderr[-2000:]
    assert checked.stderr.strip().splitlines()[-1] in run.stderr
    assert not (tmp_path / "out").exists()
