"""Scenario files: what loads, and what every kind of bad input is told."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from scenario_cases import BAD_VALUES, BAD_WORKLOADS, MINIMAL
from scenario_problems import problems

from slogate import scenarios
from slogate.scenarios import ScenarioError
from slogate.scenarios.loader import resolve
from slogate.scenarios.workloads import ChatWorkload, TraceWorkload


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_file_gets_defaults(tmp_path):
    [s] = scenarios.load(write(tmp_path, MINIMAL))
    assert s.name == "tiny" and s.api == "chat" and s.model == "auto" and s.weight == 1.0
    assert isinstance(s.workload, ChatWorkload)
    assert s.load.users == 1 and s.load.duration_s == 60.0 and not s.load.open_loop
    assert s.request.include_usage and s.request.tokenizer == "local"
    assert s.timeouts.first_token_s == 120.0
    assert s.slo.thresholds == ()
    assert s.source == str(tmp_path / "scenario.yaml")


def test_every_builtin_loads():
    for name in scenarios.BUILTINS:
        loaded = scenarios.load(name)
        assert loaded and abs(sum(s.weight for s in loaded) - 1.0) < 1e-9
        for s in loaded:
            gated = "e2e_ms" if s.api == "embeddings" else "ttft_ms"  # nothing streamed
            # agent sessions send about 100 requests in the 2-minute demo: a p99 needs 368
            stat = "p90" if s.workload.kind == "agent-trace" else "p99"
            assert any(t.metric == gated and t.stat == stat for t in s.slo.thresholds)


def test_durations_with_units(tmp_path):
    text = MINIMAL + "load: {users: 2, duration: 1m30s, warmup: 500ms}\ntimeouts: {stall: 1h}\n"
    [s] = scenarios.load(write(tmp_path, text))
    assert s.load.duration_s == 90.0 and s.load.warmup_s == 0.5 and s.timeouts.stall_s == 3600.0


@pytest.mark.parametrize(
    ("given", "vllm", "other"), [("", True, False), ("true", True, True), ("false", False, False)]
)
def test_per_chunk_usage_is_asked_where_the_engine_is_known_to_send_it(
    tmp_path, given, vllm, other
):
    """``continuous_usage`` defaults to ``auto``: on against an engine that
    named itself vLLM, off against any other (which may refuse the field);
    given true or false, it is that whatever the engine."""
    text = MINIMAL + (f"request: {{continuous_usage: {given}}}\n" if given else "")
    [s] = scenarios.load(write(tmp_path, text))
    assert s.request.continuous_usage == (given == "true" if given else "auto")
    assert s.request.for_engine("vllm").continuous_usage is vllm
    assert s.request.for_engine("sglang").continuous_usage is other
    assert s.request.for_engine("").continuous_usage is other


@pytest.mark.parametrize(("text", "path", "expected"), BAD_VALUES)
def test_bad_values_name_the_key(tmp_path, text, path, expected):
    found = problems(write(tmp_path, MINIMAL + text))
    assert path in found, found
    assert expected in found[path]


@pytest.mark.parametrize(("workload", "path", "expected"), BAD_WORKLOADS)
def test_bad_workloads_name_the_key(tmp_path, workload, path, expected):
    text = f"workload:\n  kind: chat\n  {workload}\n"
    found = problems(write(tmp_path, text))
    assert path in found, found
    assert expected in found[path]


def test_several_problems_are_reported_together(tmp_path):
    text = """
    nmae: x
    workload:
      kind: chat
      input_tokens: {dist: lognormal, median: 1020, p90: 500}
    load: {users: 0, duration: soon}
    slo: {ttft_ms: {p99: fast}}
    """
    found = problems(write(tmp_path, text))
    assert {
        "nmae",
        "workload.input_tokens.p90",
        "load.users",
        "load.duration",
        "slo.ttft_ms.p99",
    } <= set(found)


def test_file_level_problems(tmp_path):
    missing = tmp_path / "absent.yaml"
    assert "cannot read the file" in problems(missing)[""]
    broken = write(tmp_path, "name: [unclosed\n")
    assert "not valid YAML" in problems(broken)[""] and "line 2" in problems(broken)[""]
    twice = write(tmp_path, "name: a\nname: b\n" + MINIMAL.replace("name: tiny\n", ""))
    assert "appears twice" in problems(twice)[""]
    assert "workload" in problems(write(tmp_path, "name: x\n"))
    assert "expected a mapping" in problems(write(tmp_path, "- just\n- a list\n"))[""]


def test_workload_kind_and_kind_specific_checks(tmp_path):
    assert (
        "one of chat, rag, code, trace"
        in problems(write(tmp_path, "workload: {kind: poem}\n"))["workload.kind"]
    )
    rag = "workload:\n  kind: rag\n  documents: {pool: 3}\n  docs_per_request: 5\n"
    assert (
        "at most documents.pool (3)" in problems(write(tmp_path, rag))["workload.docs_per_request"]
    )
    code = "workload:\n  kind: code\n  styles: {completion: 0, edit: 0}\n"
    assert "sum > 0" in problems(write(tmp_path, code))["workload.styles"]
    multi = MINIMAL + "api: completions\n"
    assert "need api: chat" in problems(write(tmp_path, multi))["workload.turns"]
    [single] = scenarios.load(write(tmp_path, multi.replace("output_tokens: 32", "turns: 1")))
    assert single.api == "completions"


def test_trace_workload_problems(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("t,in,out\n0,10,5\n1,abc,5\n")
    base = f"workload:\n  kind: trace\n  file: {trace}\n  columns: {{time: t, input_tokens: in, "
    bad_row = base + "output_tokens: out}\n"
    assert (
        "t.csv line 3, field 'in': expected a number >= 0, got 'abc'"
        in problems(write(tmp_path, bad_row))["workload.columns.input_tokens"]
    )
    trace.write_text("t,in,out\n0,10,5\n1,12,5\n")
    bad_column = base + "output_tokens: generated}\n"
    assert (
        "column 'generated' not in t.csv (columns: t, in, out)"
        in problems(write(tmp_path, bad_column))["workload.columns.output_tokens"]
    )
    missing = "workload: {kind: trace, file: nothere.csv}\nload: {rate: {arrival: trace}}\n"
    found = problems(write(tmp_path, missing))
    assert "file not found" in found["workload.file"] and "load.rate.arrival" not in found
    both = (
        "workload: {kind: trace, file: azure-conv}\n"
        "load: {rate: {arrival: trace, rps: 3, speedup: 2}}\n"
    )
    assert "not both" in problems(write(tmp_path, both))["load.rate"]


def test_tokenizer_file_problems(tmp_path):
    (tmp_path / "not-a-tokenizer.json").write_text('{"x": 1}')
    missing = problems(write(tmp_path, MINIMAL + "request: {tokenizer: nope.json}\n"))
    message = missing["request.tokenizer"]
    assert "the path of a tokenizer.json" in message
    assert f"no such file: {tmp_path / 'nope.json'}" in message
    bad = problems(write(tmp_path, MINIMAL + "request: {tokenizer: not-a-tokenizer.json}\n"))
    assert "does not load as one" in bad["request.tokenizer"]


def test_stages(tmp_path):
    text = MINIMAL + textwrap.dedent(
        """
        load:
          users: 4
          stages:
            - {name: low, duration: 30s}
            - {duration: 1m, rate: {rps: 5}}
        """
    )
    [s] = scenarios.load(write(tmp_path, text))
    low, second = s.load.stages
    assert (low.name, low.users, low.duration_s) == ("low", 4, 30.0)
    assert (second.name, second.users, second.rate.rps) == ("stage2", None, 5.0)
    assert s.load.duration_s == 90.0
    clash = (
        MINIMAL + "load:\n  duration: 10s\n  stages: [{name: a, duration: 5s, users: 1},"
        " {name: a, duration: 6s, users: 2}]\n"
    )
    found = problems(write(tmp_path, clash))
    assert "stages' total (11s)" in found["load.duration"]
    assert "'a' is used twice" in found["load.stages"]


def test_overrides_apply_and_are_validated(tmp_path):
    path = write(tmp_path, MINIMAL + "load: {users: 2, duration: 5m}\n")
    [s] = scenarios.load(
        path,
        {"users": 16, "spawn_rate": 4, "duration": "30s", "warmup": 5, "seed": 9, "rate": None},
    )
    assert (s.load.users, s.load.spawn_rate, s.load.duration_s, s.load.warmup_s, s.seed) == (
        16,
        4.0,
        30.0,
        5.0,
        9,
    )
    [o] = scenarios.load(path, {"rate": 12.5})
    assert o.load.open_loop and o.load.rate.rps == 12.5 and o.load.users is None
    found = problems(path, {"users": -1})
    assert "from the override users" in found["load.users"]
    assert "unknown override" in problems(path, {"userz": 3})[""]
    staged = write(tmp_path, MINIMAL + "load: {stages: [{duration: 5s, users: 1}]}\n", "s.yaml")
    assert "edit the stages" in problems(staged, {"users": 3})["load.stages"]
    [trace] = scenarios.load("azure-conv", {"rate": 2})
    assert trace.load.rate.arrival == "trace" and trace.load.rate.rps == 2


def test_a_short_override_duration_shortens_the_files_warmup(tmp_path):
    """`slogate run chat --duration 10s`: chat's own warm-up is 10 s, so a quarter
    of the run becomes the warm-up; a longer run keeps the file's, and an
    explicit --warmup is checked as given."""
    [short] = scenarios.load("chat", {"duration": "10s"})
    assert (short.load.duration_s, short.load.warmup_s) == (10.0, 2.5)
    [long] = scenarios.load("chat", {"duration": "60s"})
    assert long.load.warmup_s == 10.0
    found = problems(resolve("chat"), {"duration": "10s", "warmup": "10s"})
    assert "shorter than the duration" in found["load.warmup"]
    path = write(tmp_path, MINIMAL + "load: {users: 2, duration: 5m, warmup: 30s}\n")
    [s] = scenarios.load(path, {"duration": 20})
    assert s.load.warmup_s == 5.0


def test_mix_files(tmp_path):
    write(tmp_path, MINIMAL, "a.yaml")
    write(tmp_path, MINIMAL.replace("tiny", "other"), "b.yaml")
    mix = write(
        tmp_path,
        """
    name: blend
    seed: 4
    load: {rate: {rps: 10}}
    scenarios:
      - {file: a.yaml, weight: 3}
      - {file: b.yaml, weight: 1}
      - {file: code, weight: 0}
    """,
        "mix.yaml",
    )
    loaded = scenarios.load(mix, {"duration": "20s"})
    assert [s.name for s in loaded] == ["tiny", "other", "code"]
    assert [s.weight for s in loaded] == [0.75, 0.25, 0.0]
    assert all(s.load.rate.rps == 10 and s.load.duration_s == 20 and s.seed == 4 for s in loaded)
    assert loaded[0].source == str(tmp_path / "a.yaml")
    sampled = {r["scenario"] for r in scenarios.sample_requests(loaded, 200)}
    assert sampled == {"tiny", "other"}


def test_bad_mix_files(tmp_path):
    write(tmp_path, MINIMAL, "a.yaml")
    write(tmp_path, "workload: {kind: chat, turns: 0}\n", "bad.yaml")
    zero = write(tmp_path, "scenarios: [{file: a.yaml, weight: 0}]\n", "zero.yaml")
    assert "sum > 0" in problems(zero)["scenarios"]
    twice = write(tmp_path, "scenarios: [{file: a.yaml}, {file: a.yaml}]\n", "twice.yaml")
    assert "already used" in problems(twice)["scenarios[1].name"]
    absent = write(
        tmp_path, "scenarios: [{file: gone.yaml}, {file: a.yaml, wieght: 2}]\n", "absent.yaml"
    )
    found = problems(absent)
    assert "file not found" in found["scenarios[0].file"]
    assert "did you mean 'weight'" in found["scenarios[1].wieght"]
    member = write(tmp_path, "scenarios: [{file: bad.yaml}]\n", "member.yaml")
    with pytest.raises(ScenarioError) as info:
        scenarios.load(member)
    [p] = info.value.problems
    assert p.file.endswith("bad.yaml") and p.path == "workload.turns.value"


def test_trace_rate_follows_the_trace(tmp_path):
    [s] = scenarios.load("azure-code")
    assert isinstance(s.workload, TraceWorkload)
    assert s.load.rate.rps == pytest.approx(s.workload.trace.rate_rps)
    fast = write(
        tmp_path,
        "workload: {kind: trace, file: azure-code}\nload: {rate: {arrival: trace, speedup: 4}}\n",
    )
    [f] = scenarios.load(fast)
    assert f.load.rate.rps == pytest.approx(4 * s.workload.trace.rate_rps)
