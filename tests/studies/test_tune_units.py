"""slogate tune's pure parts with hand-checked numbers: factors and treatments,
the pruning rule, the comparison with the current settings, the Pareto front
and the recommendation; and bad input refused with one line, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from slogate.cli import main
from slogate.engines.template import TemplateUnderTune
from slogate.engines.tunable import CacheResetFailed, SimulatedUnderTune
from slogate.studies.tune import (
    TreatmentRun,
    TuneParts,
    TuneSettings,
    engine_session,
    full_grid_estimate,
    replayed_trials,
)
from slogate.studies.tune_factors import (
    Treatment,
    current_settings,
    parse_set,
    read_factors,
    treatments,
    with_current,
)
from slogate.studies.tune_verdict import (
    against_runner_up,
    bounds,
    compared,
    pareto_front,
    prune_reason,
    recommended,
)

SCENARIO = (Path(__file__).parents[1] / "data" / "tune-capped.yaml").read_text()


def test_the_full_factorial_with_linked_factors_and_exclusions(tmp_path: Path) -> None:
    path = tmp_path / "factors.yaml"
    path.write_text(
        "factors:\n  max_num_seqs: [8, 16]\n  max_num_batched_tokens: [512, 1024]\n"
        "  enable_prefix_caching: [true, false]\n"
        "linked:\n  - [max_num_seqs, max_num_batched_tokens]\n"
        "exclude:\n  - {max_num_seqs: 16, enable_prefix_caching: false}\n"
    )
    names = [t.name for t in treatments(read_factors(path))]
    assert names == [
        "max_num_seqs=8,max_num_batched_tokens=512,enable_prefix_caching=true",
        "max_num_seqs=8,max_num_batched_tokens=512,enable_prefix_caching=false",
        "max_num_seqs=16,max_num_batched_tokens=1024,enable_prefix_caching=true",
    ]


def test_set_levels_make_a_grid_and_the_current_settings_join_it() -> None:
    space = parse_set(["max_num_seqs=1,2,4", "tp=1,2"])
    grid = treatments(space)
    assert len(grid) == 6 and grid[0].settings == {"max_num_seqs": "1", "tp": "1"}
    inside = with_current(grid, {"max_num_seqs": "2", "tp": "1"})
    assert len(inside) == 6 and [t.current for t in inside].count(True) == 1
    defaults = {"max_num_seqs": "256", "tp": "1"}
    outside = with_current(grid, current_settings(space.names, defaults, {}))
    assert len(outside) == 7 and outside[0].current and outside[0].settings["max_num_seqs"] == "256"
    with pytest.raises(ValueError, match="--current tp=VALUE needed"):
        current_settings(space.names, {"max_num_seqs": "8"}, {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("factors: [1, 2]\n", "factors: expected a mapping"),
        ("factors:\n  a: [1]\nlinked: [[a, b]]\n", "linked.0: 'b' is not a factor"),
        ("factors:\n  a: [1, 2]\n  b: [1]\nlinked: [[a, b]]\n", "same number of levels"),
        ("factors:\n  a: [1]\nexclude: [{a: 3}]\n", "exclude.0.a: '3' is not one of its levels"),
        ("factors:\n  a: [1, 1]\n", "a level is given twice"),
        ("factors: {a: [1]\n", "not valid YAML"),
        ("factor:\n  a: [1]\n", "unknown key 'factor'"),
    ],
)
def test_bad_factor_files_name_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as raised:
        read_factors(path)
    assert str(raised.value).startswith(str(path))


FACTOR_FILES = {
    "good": "factors:\n  max_num_seqs: [8, 16]\n  enable_prefix_caching: [true, false]\n"
    "linked: []\nexclude:\n  - {max_num_seqs: 16, enable_prefix_caching: false}\n",
    "no factors": "linked: [[a, b]]\n",
    "unknown key": "factor:\n  a: [1]\n",
    "a level that is a list": "factors:\n  a: [[1]]\n",
    "a group of one": "factors:\n  a: [1]\nlinked: [[a]]\n",
}


@pytest.mark.parametrize("case", FACTOR_FILES)
def test_the_factors_schema_accepts_what_the_reader_accepts(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``slogate schema tune-factors`` and read_factors agree on the shape."""
    assert main(["schema", "tune-factors"]) == 0
    schema = json.loads(capsys.readouterr().out)
    path = tmp_path / "f.yaml"
    path.write_text(FACTOR_FILES[case])
    errors = list(Draft202012Validator(schema).iter_errors(yaml.safe_load(path.read_text())))
    if case == "good":
        assert errors == [] and treatments(read_factors(path))
    else:
        assert errors, case
        with pytest.raises(ValueError):
            read_factors(path)


def record(name: str, lower: float | None, upper: float | None, **extra: object) -> dict:
    block = {"lower": lower, "upper": upper}
    status = extra.pop("status", "measured")
    key = "capacity" if status == "measured" else "screening"
    return {"name": name, "status": status, key: block, "current": False, **extra}


def test_a_treatment_that_failed_a_load_another_held_is_pruned() -> None:
    best = record("best", 24, 32)
    low = record("low", 12, 16, status="pending")
    touching = record("touching", 16, 24, status="pending")  # failed at 24, which best held
    above = record("above", 16, 26, status="pending")  # may hold up to 26: still in the race
    reason = prune_reason(low, [best, low, touching], "requests/s")
    assert reason == (
        "screening bracket [12, 16] requests/s: it failed at a load best held (24 requests/s)"
    )
    assert prune_reason(touching, [best, touching], "requests/s") is not None
    assert prune_reason(above, [best, above], "requests/s") is None
    assert prune_reason({**low, "current": True}, [best, low], "requests/s") is None
    assert prune_reason(record("open", 30, None, status="pending"), [best], "requests/s") is None
    screened_best = record(
        "screened", 20, 40, status="pending"
    )  # a bracket counts before its search
    assert prune_reason(low, [screened_best, low], "requests/s") is not None
    assert prune_reason(low, [low, {"name": "failed", "status": "failed"}], "requests/s") is None
    failed_first = record("failed first", None, 24, status="pending")  # its first trial failed
    assert prune_reason(failed_first, [best, failed_first], "requests/s") is not None


def test_better_worse_or_noise_against_the_current_interval() -> None:
    current = record("current", 8, 12, current=True)
    assert compared(record("a", 12, 16), current) == "better"  # held 12, which current failed
    assert compared(record("b", 4, 8), current) == "worse"
    assert compared(record("c", 10, 14), current) == "noise"
    assert compared(current, current) is None
    assert compared({"name": "f", "status": "failed"}, current) is None
    assert bounds(record("none passed", None, 4)) == (0.0, 4)
    assert bounds(record("none failed", 64, None)) == (64, math.inf)


def measured(name: str, value: float, per_gpu: float, per_user: float) -> dict:
    return {
        **record(name, value, value * 1.2),
        "capacity": {"value": value, "lower": value, "upper": value * 1.2},
        "throughput": {"per_gpu": per_gpu, "per_user": per_user},
    }


def test_the_recommendation_against_its_runner_up() -> None:
    """Better only where it held a load the runner-up failed: [9, 12] against
    [6, 9] is better (9 held, 9 failed); [9, 12] against [8, 10] is noise."""
    best = {**record("best", 9, 12), "capacity": {"value": 9, "lower": 9, "upper": 12}}
    apart = {**record("apart", 6, 9), "capacity": {"value": 6, "lower": 6, "upper": 9}}
    close = {**record("close", 8, 10), "capacity": {"value": 8, "lower": 8, "upper": 10}}
    assert against_runner_up([best, apart], best) == (apart, "better")
    assert against_runner_up([apart, close, best], best) == (close, "noise")
    assert against_runner_up([best], best) is None


def test_the_recommendation_is_the_best_capacity_then_the_pareto_front() -> None:
    a = measured("a", 16, 900, 30)
    b = measured("b", 16, 1200, 25)  # same capacity, more per GPU, less per user: both on the front
    c = measured("c", 16, 1100, 20)  # dominated by b
    d = measured("d", 8, 2000, 50)  # less capacity: never recommended
    assert [r["name"] for r in pareto_front([a, b, c, d])] == ["d"]
    assert [r["name"] for r in pareto_front([a, b, c])] == ["a", "b"]
    best = recommended([a, b, c, d])
    assert best is not None and best["name"] == "b"


def test_the_full_grid_estimate_replays_a_search_from_the_target_on_each_interval() -> None:
    settings = TuneSettings(
        "s.yaml", "rate", "requests/s", target=8, duration=3, screen_duration=2, tolerance=0.25
    )
    # From 8 on [24, 32) (middle 28): 8 and 16 pass, 32 fails, 24 and 28 pass (the
    # bracket [28, 32] is within 25%), the confirmation at 28: six trials.
    assert replayed_trials(settings, 24, 32) == 6
    records = [
        {
            "status": "measured",
            "capacity": {"lower": 24, "upper": 32},
            "full_search_s": 40.0,
            "full_trials": 4,
            "engine_time_s": 60.0,
        },
        {"status": "pruned", "screening": {"lower": 24, "upper": 32}, "engine_time_s": 20.0},
        {"status": "failed", "engine_time_s": 5.0},
    ]
    assert full_grid_estimate(settings, records) == 10.0 * (6 + 6) + 5.0
    assert full_grid_estimate(settings, records[1:]) is None


def test_template_placeholders_must_be_factors_or_the_port() -> None:
    with pytest.raises(ValueError, match=r"--start-command: unknown placeholder \{max_seqs\}"):
        TemplateUnderTune(
            "serve --n {max_seqs} --port {port}", "http://h:{port}/", ("max_num_seqs",)
        )
    with pytest.raises(ValueError, match="factor 'tp' appears in no template"):
        TemplateUnderTune("serve --n {n}", "http://h:{port}/", ("n", "tp"))
    engine = TemplateUnderTune("serve --n {n} --port {port}", "http://h:{port}/health", ("n",))
    assert engine.launch_command({"n": "8; rm -rf /"}) == "serve --n '8; rm -rf /' --port {port}"


def test_the_simulated_engine_checks_settings_before_starting() -> None:
    engine = SimulatedUnderTune(speedup=4)
    engine.check({"max_num_seqs": "8", "tp": "2"})
    assert engine.gpus({"tp": "2"}) == 2
    assert engine.defaults()["max_num_seqs"] == "1024"  # vLLM v1 on a large GPU
    with pytest.raises(ValueError, match="unknown setting 'max_seqs'"):
        engine.check({"max_seqs": "8"})
    with pytest.raises(ValueError, match="max_num_seqs"):
        engine.check({"max_num_seqs": "many"})
    assert engine.launch_command({"max_num_seqs": "8"}) == (
        "slogate engine --profile llama-3.1-8b@h100 --speedup 4 --set max_num_seqs=8"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "max_seqs=1,2"], "unknown setting 'max_seqs'"),
        (["--factors", "{tmp}/bad.yaml"], "bad.yaml: not valid YAML"),
        (
            [
                "--engine",
                "template",
                "--set",
                "n=1,2",
                "--current",
                "n=1",
                "--start-command",
                "serve {n} {prot}",
                "--ready-url",
                "http://127.0.0.1:{port}/",
            ],
            "unknown placeholder {prot}",
        ),
        (["--set", "max_num_seqs=1,2", "--scenario-without-slo"], "declares no SLO"),
        (["--set", "max_num_seqs=1,2", "--tolerance", "1.5"], "--tolerance: tolerance must lie"),
        (["--engine", "template", "--from", "{tmp}"], "--from: the template engine's settings"),
        ([], "no factors: give --set"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    scenario = tmp_path / "capped.yaml"
    scenario.write_text(SCENARIO)
    (tmp_path / "bad.yaml").write_text("factors: {a: [1]\n")
    if "--scenario-without-slo" in args:
        args = [a for a in args if a != "--scenario-without-slo"]
        scenario.write_text(SCENARIO.split("slo:")[0])
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["tune", str(scenario), *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


class RefusingReset:
    """A started engine that refuses to empty its caches (as a real one may)."""

    url, startup_s = "http://127.0.0.1:9", 0.5
    stopped = False

    def reset_caches(self) -> None:
        raise CacheResetFailed("POST /reset_prefix_cache: 500")

    def peak_memory_bytes(self) -> int | None:
        return 1024

    def alive(self) -> bool:
        return True

    def log_tail(self) -> str:
        return "last words"

    def stop(self) -> int | None:
        self.stopped = True
        return 0


def test_a_refused_cache_reset_fails_the_treatment_and_stops_its_engine(tmp_path: Path) -> None:
    running = RefusingReset()
    engine = SimulatedUnderTune()
    engine.start = lambda settings, log_dir: running  # type: ignore[method-assign]
    parts = TuneParts(engine, lambda url, folder: None, lambda s: 1, lambda line: None)  # type: ignore[arg-type,return-value]
    run = TreatmentRun(1, Treatment({"max_num_seqs": "8"}), tmp_path / "01")
    record = engine_session(parts, run, "screen", lambda url, folder: None, lambda *a: {})
    assert record["status"] == "failed" and running.stopped
    assert record["error"] == "screen: cache reset failed: POST /reset_prefix_cache: 500"
    assert record["log_tail"] == "last words" and record["peak_memory_bytes"] == 1024
