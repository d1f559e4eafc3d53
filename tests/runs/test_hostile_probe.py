"""The hostile probe of issue 42 (N6 to N12 and its minor cases): data files,
logins, signals and results roots built to break a command end by the
contract of docs/reliability.md (one line, the right exit code, no traceback)."""

from __future__ import annotations

import http.cookiejar
import http.server
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from fake_engines import engine_without
from httpserving import serving
from loadruns import ROOT, ModelsHandler, cli, free_port, scenario_file, slogate, summary
from mounts import in_own_mounts
from nights import night
from webui import post, template_args, wait_for

from slogate.analysis.documents.file_sizes import MAX_DATA_BYTES, MAX_DOCUMENT_BYTES
from slogate.client.served_by import MAX_NAME_CHARS
from slogate.engines.exact import ExactEngine
from slogate.scenarios.errors import QUOTED_CHARS
from slogate.scenarios.limits import MAX_AGENT_DEPTH, MAX_TOKENS

AGENTS = ROOT / "scenarios" / "data" / "agents"
WEKA = json.loads((AGENTS / "coding-session.weka.json").read_text())
OTEL = json.loads((AGENTS / "coding-session.otel.json").read_text())
CALL = '{"type": "n", "in": 100, "out": 10}'


def agent_check(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    """``slogate scenario check`` of an agent-trace scenario reading ``text``."""
    (tmp_path / "trace.json").write_text(text)
    workload = {"kind": "agent-trace", "file": str(tmp_path / "trace.json")}
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"workload": workload, "load": {"users": 1, "duration": "5s"}}))
    return cli("scenario", "check", str(path))


def one_line(done: subprocess.CompletedProcess, code: int) -> str:
    assert done.returncode == code, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    return lines[0]


def weka(change) -> str:
    data = json.loads(json.dumps(WEKA))
    change(data)
    return json.dumps(data)


def nested_subagents(depth: int) -> str:
    """A Weka session whose subagents each start the next, ``depth`` deep
    (written as text: ``json.dumps`` itself recurses per level)."""
    text = CALL
    for level in range(depth):
        text = f'{{"type": "subagent", "agent_id": "a{level}", "requests": [{CALL}, {text}]}}'
    return f'{{"block_size": 64, "requests": [{CALL}, {text}]}}'


def otel_with(twin: bool) -> str:
    """The OTel session with its first agent span repeated as its own child
    (``twin``), or with that span naming itself as its parent."""
    data = json.loads(json.dumps(OTEL))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    agent = spans[0]
    if twin:
        spans.append({**agent, "parentSpanId": agent["spanId"]})
    else:
        agent["parentSpanId"] = agent["spanId"]
    return json.dumps(data)


def test_an_agent_trace_past_the_token_limit_is_refused_before_any_load(tmp_path: Path) -> None:
    """N6: ``in: 10^12`` passed the check and reached 3 GB in a run."""
    huge = weka(lambda d: d["requests"][0].update({"in": 10**12, "hash_ids": []}))
    line = one_line(agent_check(tmp_path, huge), 2)
    assert f"field 'requests[0].in': 1000000000000 is beyond the limit of {MAX_TOKENS}" in line
    at_limit = weka(lambda d: d["requests"][0].update({"in": MAX_TOKENS, "hash_ids": []}))
    assert agent_check(tmp_path, at_limit).returncode == 0


def test_otel_token_counts_past_the_limit_are_refused(tmp_path: Path) -> None:
    data = json.loads(json.dumps(OTEL))
    for span in data["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for attribute in span["attributes"]:
            if attribute["key"] == "gen_ai.usage.input_tokens":
                attribute["value"] = {"intValue": str(64_000_000)}
    line = one_line(agent_check(tmp_path, json.dumps(data)), 2)
    assert f"'gen_ai.usage.input_tokens': 64000000 is beyond the limit of {MAX_TOKENS}" in line


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 5000 + "]" * 5000, "trace.json is nested too deep to read"),
        (nested_subagents(600), "trace.json is nested too deep to read"),
        (nested_subagents(MAX_AGENT_DEPTH + 1), f"subagents nested more than {MAX_AGENT_DEPTH}"),
        (otel_with(twin=True), "has a second span with this id"),
    ],
    ids=["json-5000-deep", "600-subagents", "past-the-depth-limit", "otel-twin-span"],
)
def test_data_nested_too_deep_is_a_configuration_error(
    tmp_path: Path, text: str, says: str
) -> None:
    """N7: each raised RecursionError, exit 3 "run failed"."""
    line = one_line(agent_check(tmp_path, text), 2)
    assert "workload.file" in line and says in line


def test_a_span_naming_itself_as_its_parent_is_read(tmp_path: Path) -> None:
    assert agent_check(tmp_path, otel_with(twin=False)).returncode == 0
    assert agent_check(tmp_path, nested_subagents(MAX_AGENT_DEPTH)).returncode == 0


def test_a_huge_value_is_quoted_cut(tmp_path: Path) -> None:
    """N8: ``hash_ids`` as a 5 MB string gave a 5.2 MB error line."""
    line = one_line(agent_check(tmp_path, weka(lambda d: d["requests"][0].update(
        {"hash_ids": "x" * 5_000_000}))), 2)  # fmt: skip
    assert "'requests[0].hash_ids': expected a list of integers >= 0" in line
    assert "... (5,000,002 characters)" in line
    assert len(line) < QUOTED_CHARS + 300


def test_a_huge_scenario_value_is_quoted_cut(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, "exact-chat", load={"duration": "9" * 1_000_000})
    line = one_line(cli("scenario", "check", str(path)), 2)
    assert "load.duration" in line and len(line) < QUOTED_CHARS + 300


@pytest.mark.slow
@pytest.mark.parametrize("auth", ["mé:pässwörd", "ユーザー:ascii"], ids=["password", "user"])
def test_a_non_ascii_web_login_logs_in(tmp_path: Path, auth: str) -> None:
    """N9: every login with a non-ASCII user or password answered HTTP 500."""
    user, _, password = auth.partition(":")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine:
        ui = subprocess.Popen(
            [sys.executable, "-m", "slogate.cli", "run", "tests/data/exact-chat.yaml",
             "--web-ui", "--host", engine.url, "--web-port", str(port), "--web-auth", auth,
             "--duration", "3s", "--out", str(tmp_path / "o")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        try:
            wait_for(f"{base}/", browser)
            refused = post(browser, f"{base}/slogate/login", username=user, password="wrong")
            assert "wrong user name or password" in refused
            refused = post(browser, f"{base}/slogate/login", username="ü", password=password)
            assert "wrong user name or password" in refused
            index = post(browser, f"{base}/slogate/login", username=user, password=password)
            assert template_args(index)["num_users"] == 4
        finally:
            ui.terminate()
            _, err = ui.communicate(timeout=60)
    assert "Traceback" not in err


def repeat_set(tmp_path: Path, engine: ExactEngine, cooldown: str) -> tuple[subprocess.Popen, Path]:
    scenario = scenario_file(tmp_path, "exact-chat", load={"duration": "2s"})
    out = tmp_path / "set"
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", engine.url]
    command += ["--repeat", "3", "--cooldown", cooldown, "--warmup", "0s", "--out", str(out)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out


def wait_until(process: subprocess.Popen, ready, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.05)


def interrupted_set(process: subprocess.Popen, out: Path) -> dict:
    """The set ended by the contract after a SIGTERM: exit 3, run 1 judged, no other started."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 3, err[-3000:]
    assert "Traceback" not in err and "interrupted (SIGTERM)" in err
    s = summary(out)
    assert [r["dir"] for r in s["runs"]] == ["run-1"] and not (out / "run-2").exists()
    assert "the set was interrupted (SIGTERM)" in s["invalid_reasons"]
    assert summary(out / "run-1")["scenarios"]["exact-chat"]["requests"]["ok"] > 0
    return s


@pytest.mark.slow
def test_sigterm_in_a_cool_down_judges_the_runs_that_ended(tmp_path: Path) -> None:
    """N11: SIGTERM in the cool-down killed the set by the signal (143), no summary."""
    with ExactEngine({"ttft_ms": 20, "itl_ms": 5}) as engine:
        process, out = repeat_set(tmp_path, engine, "60s")
        wait_until(process, lambda: (out / "run-1" / "report.html").is_file())
        time.sleep(1.0)  # in the cool-down
        interrupted_set(process, out)


@pytest.mark.slow
def test_sigterm_as_a_run_writes_its_results_starts_no_other(tmp_path: Path) -> None:
    """N11: SIGTERM right after run 1's load was swallowed; runs 2 and 3 ran, exit 0."""
    with ExactEngine({"ttft_ms": 20, "itl_ms": 5}) as engine:
        process, out = repeat_set(tmp_path, engine, "0s")
        wait_until(process, lambda: (out / "run-1" / "summary.json").is_file())
        interrupted_set(process, out)


def test_prune_unlinks_a_run_folder_that_is_a_link_out_of_the_root(tmp_path: Path) -> None:
    """N12: rmtree refused the link, exit 3, the index not rewritten."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    night(root, 0)
    (root / "night-01").symlink_to(night(elsewhere, 1), target_is_directory=True)
    night(root, 2)
    done = cli("prune", str(root), "--keep", "0")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in root.iterdir()) == ["index.html"]
    assert (elsewhere / "night-01" / "summary.json").is_file()  # not the root's to delete
    assert "night-0" not in (root / "index.html").read_text()


@pytest.mark.slow
def test_prune_names_a_run_it_cannot_remove_and_finishes(tmp_path: Path) -> None:
    """A run on a read-only mount: named, the others removed, the index rewritten, exit 3."""
    stuck = night(tmp_path, 0)
    night(tmp_path, 1)
    setup = f"mount --bind {stuck} {stuck}\nmount -o remount,bind,ro {stuck}"
    done = in_own_mounts(
        setup, [sys.executable, "-m", "slogate.cli", "prune", str(tmp_path), "--keep", "0"]
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert f"cannot remove {stuck}: " in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "night-01").exists() and (tmp_path / "index.html").is_file()


def oversized(path: Path, size: int) -> Path:
    """``path`` of ``size`` bytes without writing them (a sparse file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def test_prune_skips_a_summary_past_its_size_limit(tmp_path: Path) -> None:
    """A 1 GB summary.json cost prune 3 GB and 12 s (bench_hostile measures the memory)."""
    night(tmp_path, 0)
    oversized(tmp_path / "huge" / "summary.json", MAX_DOCUMENT_BYTES + 1)
    done = cli("prune", str(tmp_path), "--keep", "0")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge", "index.html"]


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_refuse_a_data_file_past_its_size_limit(
    tmp_path: Path, command: str
) -> None:
    folder = night(tmp_path, 0)
    oversized(folder / "data" / "run.json", MAX_DATA_BYTES + 1)
    args = (str(folder),) if command == "report" else (str(folder), str(folder))
    line = one_line(cli(command, *args), 2)
    assert f"run.json: {MAX_DATA_BYTES + 1:,} bytes, over the limit of {MAX_DATA_BYTES:,}" in line


@pytest.mark.parametrize(("mode", "context"), [("clamp", 2), ("drop", 32)])
def test_a_refusal_under_fit_context_does_not_advise_it(
    tmp_path: Path, mode: str, context: int
) -> None:
    """Every request past the context, even clamped (no prompt fits 2 tokens):
    the refusal once advised passing the --fit-context the user had passed."""
    with engine_without(set(), {"default_generation_settings": {"n_ctx": context}}) as url:
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", url, "--duration", "2s",
                       "--fit-context", mode, "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"planned requests are longer than the engine's context of {context} " in done.stderr
    assert f"even --fit-context {mode} leaves no request to send" in done.stderr
    assert "or pass --fit-context" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_huge_model_id_is_cut_as_a_replica_name_is(tmp_path: Path) -> None:
    """A 100 KB model id (a label of every metric) made metrics.prom 5.8 MB and
    report.html 336 KB; it is cut to the replica names' length."""
    name = "m" * 100_000
    out = tmp_path / "out"
    with ExactEngine({"ttft_ms": 20, "itl_ms": 5}, model=name) as engine:
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", engine.url,
                       "--duration", "3s", "--warmup", "0s", "--out", str(out))  # fmt: skip
    assert done.returncode in (0, 1, 4), done.stderr[-2000:]
    s = summary(out)
    assert s["run"]["engine"]["model"] == name[:MAX_NAME_CHARS]
    assert s["scenarios"]["exact-chat"]["requests"]["ok"] > 0
    for file in ("metrics.prom", "report.html", "summary.md", "summary.json"):
        assert "m" * (MAX_NAME_CHARS + 1) not in (out / file).read_text(), file


class CachingEngine(ModelsHandler):
    """Streams a two-token reply whose usage says ``CACHED`` of 10 prompt tokens cached."""

    protocol_version = "HTTP/1.1"
    CACHED = 0

    def do_POST(self) -> None:
        if self.load_request() is None:
            return
        usage = {"prompt_tokens": 10, "completion_tokens": 2,
                 "prompt_tokens_details": {"cached_tokens": self.CACHED}}  # fmt: skip
        self.stream(
            {"choices": [{"delta": {"role": "assistant", "content": "a "}}]},
            {"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage},
        )


@pytest.mark.slow
@pytest.mark.parametrize(("cached", "hit_rate"), [(5, 0.5), (100, None), (-5, None)])
def test_a_cached_count_outside_the_prompt_is_taken_as_unsaid(
    tmp_path: Path, cached: int, hit_rate: float | None
) -> None:
    """100 cached of a 10-token prompt printed a hit rate of 1000%, -5 one of -50%.
    Above the prompt the count is taken as unsaid; below 0 no usage count is
    plausible, so the request is a protocol error (docs/reliability.md)."""
    CachingEngine.CACHED = cached
    out = tmp_path / "out"
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), CachingEngine)) as port:
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", f"http://127.0.0.1:{port}",
                       "--duration", "2s", "--warmup", "0s", "--metrics-url", "off",
                       "--out", str(out))  # fmt: skip
    block = summary(out)["scenarios"]["exact-chat"]
    if cached < 0:
        assert done.returncode == 3, done.stderr[-2000:]
        assert block["requests"]["ok"] == 0 and block["requests"]["errors"]["protocol"] > 0
    else:
        assert done.returncode in (0, 1, 4), done.stderr[-2000:]
        assert block["requests"]["ok"] > 0
    cache = block["prefix_cache"]
    assert (cache and cache["hit_rate"]) == hit_rate
    assert "1000" not in (out / "summary.md").read_text() and "-50" not in done.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("run",), "slogate run: error: the following arguments are required: scenario"),
        (("run", "chat", "--users", "abc"), "slogate run: error: argument --users/-u: expected"),
        (("scenario", "check"), "slogate scenario check: error: the following arguments"),
        (("nosuch",), "slogate: error: argument command: invalid choice: 'nosuch'"),
    ],
)
def test_a_usage_error_is_one_line_pointing_to_help(args: tuple[str, ...], says: str) -> None:
    """argparse printed 20 lines of usage above the error."""
    line = one_line(cli(*args), 2)
    assert line.startswith(says) and line.endswith("--help)")
