"""``slogate tune --from RUN_DIR``'s treatments (studies/tune_from.py): the
settings a failed run's diagnosis names, by the tune's names for the engine,
with levels around the run's own; summaries written before the diagnosis kept
its remedies structured are read by their causes.

The input is real runs' summaries: saved in tests/data/tune_from (a llama.cpp
run with one slot (one thread) for four users, made with this branch,
diagnosis re-rendered with ``slogate report``; the simulated engine with
max_num_seqs=3 for twelve users), and one made here on the simulated engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from diagnosis_cases import CASES, run

from slogate.analysis.documents.contracts import Summary, parse
from slogate.engines.tunable_served import LlamaCppUnderTune, VllmUnderTune
from slogate.studies.tune_from import (
    levels,
    remedies_linked,
    run_remedies,
    treatments_from_run,
)

DATA = Path(__file__).parents[1] / "data" / "tune_from"
CURRENT_VLLM = {"max_num_seqs": "16", "max_num_batched_tokens": "2048",
                "enable_prefix_caching": "true", "enable_chunked_prefill": "true"}  # fmt: skip


def finding(cause: str, explains: bool = True, **extra: Any) -> dict[str, Any]:
    return {"cause": cause, "text": "...", "explains": ["s: ttft p95"] if explains else [],
            **extra}  # fmt: skip


def saved(tmp_path: Path, verdict: str, *findings: dict[str, Any]) -> Path:
    (tmp_path / "summary.json").write_text(
        json.dumps({"verdict": verdict, "diagnosis": list(findings)})
    )
    return tmp_path


def test_a_saved_llamacpp_fail_gives_treatments_around_its_settings(tmp_path: Path) -> None:
    run = DATA / "llamacpp-one-slot"
    summary = json.loads((run / "summary.json").read_text())
    parse(Summary, summary, "summary.json")
    engine = LlamaCppUnderTune()
    current = {**engine.defaults(), "parallel": "1", "ctx_size": "4096"}
    factors = treatments_from_run(run, "llamacpp", current)
    # the engine's queue: more slots, with the context to keep each one's
    assert factors == {"parallel": ["1", "2", "4"], "ctx_size": ["4096", "8192", "16384"]}
    for parallel in factors["parallel"]:
        for ctx in factors["ctx_size"]:
            engine.check({**current, "parallel": parallel, "ctx_size": ctx})
    # the same document as written before remedies were kept: read by its causes
    for finding in summary["diagnosis"]:
        del finding["remedies"]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert treatments_from_run(tmp_path, "llamacpp", current) == factors


def test_settings_one_finding_moves_are_linked_into_one_remedy(tmp_path: Path) -> None:
    """The llama.cpp run's queue: slots and context move together (three
    treatments, not nine); settings of different findings stay crossed, and a
    group whose levels differ in number is not linked."""
    run = DATA / "llamacpp-one-slot"
    factors = {"parallel": ["1", "2", "4"], "ctx_size": ["4096", "8192", "16384"]}
    assert remedies_linked(run, "llamacpp", factors) == (("parallel", "ctx_size"),)
    uneven = {"parallel": ["1", "2", "4"], "ctx_size": ["4096", "8192"]}
    assert remedies_linked(run, "llamacpp", uneven) == ()

    def remedy(setting: str, direction: str) -> list[dict[str, str]]:
        return [{"engine": "vllm", "setting": setting, "direction": direction}]

    apart = saved(
        tmp_path,
        "fail",
        finding("queueing", remedies=remedy("max_num_seqs", "up")),
        finding("prefill interference", remedies=remedy("max_num_batched_tokens", "down")),
    )
    both = {"max_num_seqs": ["16", "32"], "max_num_batched_tokens": ["1024", "2048"]}
    assert remedies_linked(apart, "vllm", both) == ()


def test_a_saved_simulated_fail_gives_the_batch_caps_treatments() -> None:
    run = DATA / "simulated-max-num-seqs-3"
    current = {**CURRENT_VLLM, "max_num_seqs": "3"}
    assert treatments_from_run(run, "simulated", current) == {"max_num_seqs": ["3", "6", "12"]}
    causes = [r.cause for r in run_remedies(run, "simulated")]
    assert causes[:2] == ["concurrency ceiling", "queueing"]  # the diagnosis's order


def test_levels_step_the_remedys_way_around_the_current_one() -> None:
    assert levels("16", {"up"}, 2) == ["16", "32", "64"]
    assert levels("512", {"down"}, 2) == ["128", "256", "512"]
    assert levels("2", {"down"}, 3) == ["1", "2"]  # never below 1
    assert levels("8", {"up", "down"}, 1) == ["4", "8", "16"]
    assert levels("false", {"on"}, 2) == ["false", "true"]
    assert levels("on", {"on"}, 2) == ["true", "false"]


def test_an_old_summary_without_remedies_is_read_by_its_causes(tmp_path: Path) -> None:
    run = saved(
        tmp_path,
        "fail",
        finding("concurrency ceiling", action="Try on vLLM: raise --max-num-seqs ..."),
        finding("prefill interference"),
        finding("decode-bound", explains=False),  # explains no missed SLO
        finding("load generator"),  # names no engine setting
    )
    assert treatments_from_run(run, "vllm", CURRENT_VLLM) == {
        "max_num_seqs": ["16", "32", "64"],
        "max_num_batched_tokens": ["512", "1024", "2048"],
        "enable_chunked_prefill": ["true", "false"],
    }
    assert treatments_from_run(
        run,
        "llamacpp",
        {"parallel": "4", "batch_size": "2048", "ubatch_size": "512", "ctx_size": "32768"},
        steps=1,
    ) == {
        "parallel": ["2", "4", "8"],  # up for the ceiling, down against interference
        "ctx_size": ["32768", "65536"],
        "batch_size": ["1024", "2048"],
        "ubatch_size": ["256", "512"],
    }


def test_written_remedies_are_used_for_their_own_engine(tmp_path: Path) -> None:
    written = [{"engine": "vllm", "setting": "max_num_seqs", "direction": "down"}]
    run = saved(tmp_path, "invalid", finding("concurrency ceiling", remedies=written))
    assert treatments_from_run(run, "simulated", CURRENT_VLLM, steps=1) == {
        "max_num_seqs": ["8", "16"]
    }
    # written for vLLM, asked for llama.cpp: the cause's llama.cpp remedies
    found = run_remedies(run, "llamacpp")
    assert [(r.setting, r.direction) for r in found] == [("parallel", "up"), ("ctx_size", "up")]
    assert found[0].explains == ("s: ttft p95",)


@pytest.mark.parametrize(
    ("verdict", "findings", "engine", "current", "message"),
    [
        ("pass", [finding("queueing")], "vllm", CURRENT_VLLM, "no missed SLO"),
        ("fail", [finding("saturation")], "vllm", CURRENT_VLLM, "names a setting"),
        ("fail", [finding("queueing")], "template", CURRENT_VLLM, "template"),
        ("fail", [finding("queueing")], "vllm", {}, "max_num_seqs"),
        ("fail", [finding("queueing")], "vllm", {"max_num_seqs": "many"}, "max_num_seqs"),
    ],
)
def test_what_cannot_be_tuned_is_said(
    tmp_path: Path,
    verdict: str,
    findings: list[dict[str, Any]],
    engine: str,
    current: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        treatments_from_run(saved(tmp_path, verdict, *findings), engine, current)


def test_a_folder_without_a_summary_is_said(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no summary\.json"):
        treatments_from_run(tmp_path, "vllm", CURRENT_VLLM)
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(ValueError, match="not readable JSON"):
        treatments_from_run(tmp_path, "vllm", CURRENT_VLLM)


@pytest.mark.slow
def test_a_simulated_engine_fail_gives_treatments_the_tune_can_run(tmp_path: Path) -> None:
    # max_num_seqs=3 under 12 users: a concurrency ceiling (tests/runs/test_diagnosis_runs.py)
    summary = run(tmp_path, CASES["batch"])
    parse(Summary, summary, "summary.json")  # the remedies hold to the published schema
    ceiling = [f for f in summary["diagnosis"] if f["cause"] == "concurrency ceiling"]
    assert ceiling and ceiling[0]["remedies"] == [
        {"engine": "vllm", "setting": "max_num_seqs", "direction": "up"}
    ], summary["diagnosis"]
    current = {**CURRENT_VLLM, "max_num_seqs": "3"}
    factors = treatments_from_run(tmp_path / "out", "simulated", current)
    assert factors["max_num_seqs"] == ["3", "6", "12"]
    # every level is one the real engines' tune accepts too
    for level in factors["max_num_seqs"]:
        VllmUnderTune().check({**current, "max_num_seqs": level})
    # the same run read for llama.cpp: its own names for the ceiling's remedy
    with pytest.raises(ValueError, match="parallel"):
        treatments_from_run(tmp_path / "out", "llamacpp", {})
