"""Pre-flight: before any load the run asks the engine its context length
(``max_model_len`` in ``/v1/models``, llama.cpp's ``/props``, TGI's ``/info``)
and refuses planned requests longer than it, naming the counts, unless
``--fit-context`` clamps or drops them; and it refuses a scenario whose API
route the engine does not serve (docs/load.md, "Pre-flight")."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from fake_engines import engine_without
from loadruns import slogate, summary

from slogate import scenarios
from slogate.client.engine_info import RouteNotServed, discover, probe_route
from slogate.engines.simulated import start_engine
from slogate.scenarios.context_fit import (
    ContextFit,
    fitted,
    fitted_conversation,
    overflow,
    sampled_overflow,
)
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import make_writer
from slogate.simengine.profiles import DEFAULT_PROFILE


def turn(turn_index: int, prompt: int, output: int, text: str = "x") -> PlannedTurn:
    return PlannedTurn(
        scenario="chat",
        conversation=0,
        turn=turn_index,
        user_text=text,
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
    assert fitted(long_prompt, clamp) is None  # past the context, and nothing to cut it with
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


def test_agent_sessions_are_counted_against_the_context_from_their_lengths() -> None:
    """coding-agent's calls grow to 129,000 tokens of context: against 32k most
    of the sampled calls are over, the longest one named."""
    [scenario] = scenarios.load("coding-agent")
    counts = sampled_overflow(scenario, ContextFit(32_768, "drop"))
    assert counts.scenario == "coding-agent" and counts.sampled == 2000
    assert 0 < counts.over == counts.dropped < counts.sampled and counts.clamped == 0
    assert counts.longest_input > 32_768
    assert sampled_overflow(scenario, ContextFit(1_000_000, "drop")).over == 0


def test_a_prompt_past_the_context_loses_its_tail_until_its_output_fits() -> None:
    """Clamped, a prompt that alone fills the context keeps its start byte for
    byte (a shared prefix stays shared) and loses just enough of its tail for
    its planned output, up to half the context; counted with the tokenizer the
    planner counted it with."""
    writer = make_writer("prose", "local", None)
    text, count = writer.fill(np.random.default_rng(7), 5000)
    history = 300  # tokens of system text and earlier turns: not cut
    long_prompt = turn(1, history + count, 64, text)
    clamped = fitted(long_prompt, ContextFit(4096, "clamp"), writer.trim)
    assert clamped is not None
    assert text.startswith(clamped.user_text) and clamped.user_text[-1:].strip()
    kept = writer.count(clamped.user_text)
    assert clamped.intended_input_tokens == history + kept
    assert (clamped.max_tokens, clamped.intended_output_tokens) == (64, 64)
    # as much as fits, not less: one more word would not
    assert 4096 - 64 - 8 <= clamped.intended_input_tokens <= 4096 - 64
    next_word = re.compile(r"\S\s").search(text, len(clamped.user_text) + 1)
    longer = text[: next_word.end() - 1] if next_word else text
    assert history + writer.count(longer) > 4096 - 64
    # a planned output longer than half the context keeps half of it
    huge_output = fitted(
        turn(1, history + count, 3000, text), ContextFit(4096, "clamp"), writer.trim
    )
    assert huge_output is not None and huge_output.max_tokens == 2048
    assert huge_output.intended_input_tokens <= 2048
    # the history alone past the context: nothing of this turn's text can help
    assert fitted(turn(1, 4200 + count, 64, text), ContextFit(4096, "clamp"), writer.trim) is None
    assert fitted(long_prompt, ContextFit(4096, "drop"), writer.trim) is None


def test_a_route_the_engine_does_not_serve_is_refused_before_any_load(tmp_path: Path) -> None:
    with engine_without({"/v1/responses"}) as url:
        probe_route(url, "/v1/chat/completions", "m", None)  # 400: served
        with pytest.raises(RouteNotServed, match=r"POST http://127.0.0.1:\d+/v1/responses "
                           r"answered HTTP 404"):  # fmt: skip
            probe_route(url, "/v1/responses", "m", None)
        scenario = tmp_path / "responses.yaml"
        chat = (Path(__file__).parents[2] / "scenarios" / "chat.yaml").read_text()
        scenario.write_text(chat.replace("api: chat", "api: responses"))
        refused = slogate("run", str(scenario), "--host", url, "--duration", "2s",
                          "--out", str(tmp_path / "out"))  # fmt: skip
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "/v1/responses answered HTTP 404" in refused.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_llama_cpp_announces_its_context_in_props() -> None:
    with engine_without(set(), {"default_generation_settings": {"n_ctx": 2048}}) as url:
        assert discover(url, None).context == 2048
    with engine_without(set()) as url:
        assert discover(url, None).context is None


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
