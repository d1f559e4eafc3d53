"""Pre-flight: before any load the run asks the engine its context length
(``max_model_len`` in ``/v1/models``) and refuses planned requests longer than
it, naming the counts, unless ``--fit-context`` clamps or drops them
(docs/load.md, "Pre-flight")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from loadruns import slogate, summary

from slogate.engines.simulated import start_engine
from slogate.scenarios.context_fit import ContextFit, fitted, fitted_conversation, overflow
from slogate.scenarios.model import PlannedTurn
from slogate.simengine.profiles import DEFAULT_PROFILE


def turn(turn_index: int, prompt: int, output: int) -> PlannedTurn:
    return PlannedTurn(
        scenario="chat",
        conversation=0,
        turn=turn_index,
        user_text="x",
        max_tokens=output,
        intended_input_tokens=prompt,
        intended_output_tokens=output,
    )


def test_a_request_past_the_context_is_clamped_to_its_room_or_dropped() -> None:
    fits, long_output, long_prompt = turn(0, 3000, 1096), turn(1, 4000, 200), turn(2, 4097, 64)
    clamp, drop = ContextFit(4096, "clamp"), ContextFit(4096, "drop")
    assert fitted(fits, clamp) is fits and fitted(fits, drop) is fits  # 4096: fits exactly
    clamped = fitted(long_output, clamp)
    assert clamped is not None
    assert (clamped.max_tokens, clamped.intended_output_tokens) == (96, 96)
    assert fitted(long_output, drop) is None
    assert fitted(long_prompt, clamp) is None  # the prompt alone is past the context
    # a dropped turn ends its conversation: the turns after it carry its history
    conversation = (fits, long_prompt, turn(3, 100, 10))
    assert fitted_conversation(conversation, clamp) == (fits,)


def test_the_overflow_counts_name_how_many_of_how_many_and_the_longest() -> None:
    turns = [turn(0, 1000, 100)] * 7 + [turn(0, 4000, 200), turn(0, 4097, 64), turn(0, 5000, 1)]
    found = overflow("chat", iter(turns), ContextFit(4096, "clamp"))
    assert (found.sampled, found.over, found.clamped, found.dropped) == (10, 3, 1, 2)
    assert (found.longest_input, found.longest_output) == (5000, 1)
    assert found.refusal(4096).startswith(
        "scenario chat: 3 of 10 planned requests are longer than the engine's context of "
        "4096 tokens (prompt + max output tokens; the longest 5000 + 1 = 5001)"
    )
    assert overflow("chat", iter(turns), ContextFit(4096, "drop")).dropped == 3


@pytest.mark.slow
def test_the_chat_scenario_is_refused_by_a_4096_token_engine_and_runs_clamped(
    tmp_path: Path,
) -> None:
    """Issue 23's case: the chat scenario plans prompts past a 4,096-token
    engine. Refused before any load (exit 2, the counts); with --fit-context
    clamp it runs without one request refused by the engine, and summary.json,
    summary.md and the report say how many were clamped and dropped."""
    with start_engine(DEFAULT_PROFILE, max_model_len=4096, speedup=20) as engine:
        run = ("run", "chat", "--host", engine.url, "--users", "4", "--duration", "4s")
        refused = slogate(*run, "--warmup", "0s", "--out", str(tmp_path / "refused"))
        out = tmp_path / "clamped"
        clamped = slogate(*run, "--warmup", "0s", "--out", str(out), "--fit-context", "clamp")
    assert refused.returncode == 2, refused.stderr[-2000:]
    said = re.search(
        r"scenario chat: (\d+) of 2000 planned requests are longer than the engine's context "
        r"of 4096 tokens \(prompt \+ max output tokens; the longest (\d+) \+ (\d+) = (\d+)\)",
        refused.stderr,
    )
    assert said, refused.stderr[-2000:]
    over, longest_in, longest_out, longest = map(int, said.groups())
    assert 0 < over < 2000 and longest == longest_in + longest_out > 4096
    assert not (tmp_path / "refused" / "summary.json").exists()

    assert clamped.returncode in (0, 1, 4), clamped.stderr[-2000:]
    doc = summary(out)
    requests = doc["scenarios"]["chat"]["requests"]
    assert requests["ok"] > 0 and requests["failed"] == 0
    engine_meta = doc["run"]["engine"]
    assert engine_meta["context"] == 4096
    (fit,) = engine_meta["fit_context"]["scenarios"]
    assert engine_meta["fit_context"]["mode"] == "clamp"
    assert (fit["sampled"], fit["over"]) == (2000, over)
    assert fit["clamped"] + fit["dropped"] == over and fit["clamped"] > 0
    line = f"chat: {over} of 2000 planned requests longer ({fit['clamped']} clamped"
    assert line in (out / "report.html").read_text()
    assert line.replace("(", "\\(") in (out / "summary.md").read_text()
