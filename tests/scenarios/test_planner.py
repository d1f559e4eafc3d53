"""The planner: deterministic, exact prompt lengths, real and unique text,
sharing only where a scenario asks for it, and arrivals that follow the load."""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tokenizers_small import small_tokenizer

from slogate import scenarios
from slogate.scenarios import Planner, Scenario
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, tokenizer_counter

count = tokenizer_counter(str(LOCAL_TOKENIZER))


def scenario(tmp_path: Path, text: str) -> Scenario:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    [s] = scenarios.load(path)
    return s


def turns(planner: Planner, n: int) -> list[scenarios.PlannedTurn]:
    out = []
    while len(out) < n:
        out.extend(planner.conversation().turns)
    return out[:n]


def prompt_tokens(turn: scenarios.PlannedTurn) -> int:
    return count(turn.user_text) + (count(turn.system_text) if turn.system_text else 0)


@pytest.mark.parametrize("name", ["chat", "rag", "code", "azure-conv", "azure-code"])
def test_same_seed_and_stream_same_plan(name):
    [s] = scenarios.load(name)
    assert turns(Planner(s, 1, 3), 40) == turns(Planner(s, 1, 3), 40)
    first = [t.user_text for t in turns(Planner(s, 1, 3), 20)]
    assert first != [t.user_text for t in turns(Planner(s, 1, 4), 20)]
    assert first != [t.user_text for t in turns(Planner(s, 2, 3), 20)]


def test_same_seed_same_arrivals():
    [s] = scenarios.load("code")
    a = list(itertools.islice(Planner(s, 5).arrivals(), 200))
    assert a == list(itertools.islice(Planner(s, 5).arrivals(), 200))
    b = list(itertools.islice(Planner(s, 6).arrivals(), 200))
    assert [t.arrival_s for t in a] != [t.arrival_s for t in b]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("rag", marks=pytest.mark.slow),
        "code",
        "azure-conv",
        pytest.param("azure-code", marks=pytest.mark.slow),
    ],
)
def test_single_turn_inputs_are_exact(name):
    [s] = scenarios.load(name)
    for turn in turns(Planner(s, 0), 150):
        assert prompt_tokens(turn) == turn.intended_input_tokens


def test_chat_turns_are_exact_and_grow(tmp_path):
    s = scenario(
        tmp_path,
        """
        workload:
          kind: chat
          system: {tokens: 40, shared: false}
          turns: {dist: uniform, min: 2, max: 5}
        """,
    )
    planner = Planner(s, 0)
    for _ in range(40):
        conv = planner.conversation()
        history = count(conv.turns[0].system_text)
        assert history == 40
        for k, turn in enumerate(conv.turns):
            assert turn.turn == k and turn.conversation == conv.index
            assert history + count(turn.user_text) == turn.intended_input_tokens
            history = turn.intended_input_tokens + turn.intended_output_tokens
            assert turn.max_tokens == turn.intended_output_tokens >= 1
            assert turn.think_time_s >= 0
        inputs = [t.intended_input_tokens for t in conv.turns]
        assert inputs == sorted(inputs)
        assert len({t.system_text for t in conv.turns}) == 1


def test_large_prompts_join_several_passages(tmp_path):
    s = scenario(tmp_path, "workload: {kind: chat, turns: 1, input_tokens: 60000}\n")
    [turn] = Planner(s, 0).conversation().turns
    assert count(turn.user_text) == turn.intended_input_tokens == 60000


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["chat", "code"])
def test_a_tokenizer_file_makes_its_own_counts_exact(tmp_path, kind):
    small_tokenizer(tmp_path / "my-tokenizer.json")
    single = ", turns: 1" if kind == "chat" else ""
    s = scenario(
        tmp_path,
        f"""
        workload: {{kind: {kind}{single}, input_tokens: {{dist: uniform, min: 50, max: 5000}}}}
        request: {{tokenizer: my-tokenizer.json}}
        """,
    )
    assert s.request.tokenizer == str(tmp_path / "my-tokenizer.json")
    mine = tokenizer_counter(s.request.tokenizer)
    planned = turns(Planner(s, 0), 150)
    for turn in planned:
        system = mine(turn.system_text) if turn.system_text else 0
        assert system + mine(turn.user_text) == turn.intended_input_tokens
    assert sum(prompt_tokens(t) != t.intended_input_tokens for t in planned) > 140  # not SmolLM2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["chat", "code"])
def test_estimate_is_close_without_exactness(tmp_path, kind):
    s = scenario(
        tmp_path,
        f"""
        workload: {{kind: {kind}, input_tokens: {{dist: uniform, min: 300, max: 4000}}}}
        request: {{tokenizer: estimate}}
        """,
    )
    planned = [t for t in turns(Planner(s, 0), 300) if t.turn == 0]
    ratios = np.array([count(t.user_text) / t.intended_input_tokens for t in planned])
    assert np.median(ratios) == pytest.approx(1.0, abs=0.05)
    assert np.mean(np.abs(ratios - 1) < 0.1) > 0.6


@pytest.mark.slow
def test_injected_counter_is_the_measure(tmp_path):
    s = scenario(tmp_path, "workload: {kind: code, input_tokens: 800}\n")
    calls = []

    def engine(text: str) -> int:  # an engine tokenizer that counts 10% more than ours
        calls.append(1)
        return int(count(text) * 1.1)

    planned = turns(Planner(s, 0, count_tokens=engine), 100)
    assert [engine(t.user_text) for t in planned] == [t.intended_input_tokens for t in planned]
    assert all(abs(t.intended_input_tokens - 800) <= 8 for t in planned)
    assert sum(t.intended_input_tokens == 800 for t in planned) >= 60
    assert len(calls) < 100 * 6


def test_injected_counter_unlike_any_tokenizer_still_converges(tmp_path):
    s = scenario(tmp_path, "workload: {kind: code, input_tokens: 800}\n")

    def words(text: str) -> int:
        return len(text.split())

    planned = turns(Planner(s, 0, count_tokens=words), 100)
    misses = np.array([abs(t.intended_input_tokens - 800) for t in planned])
    assert np.mean(misses <= 5) >= 0.9


def test_injected_counter_like_the_local_one_costs_few_calls(tmp_path):
    s = scenario(tmp_path, "workload: {kind: chat, turns: 1, input_tokens: 1000}\n")
    calls = []

    def engine(text: str) -> int:
        calls.append(1)
        return count(text)

    planned = turns(Planner(s, 0, count_tokens=engine), 50)
    assert sum(t.intended_input_tokens == 1000 for t in planned) >= 45
    assert all(abs(t.intended_input_tokens - 1000) <= 2 for t in planned)
    assert len(calls) <= 50 * 3


def test_prompts_start_uniquely_unless_shared():
    heads = []
    for name in ("chat", "code", "azure-conv"):
        [s] = scenarios.load(name)
        for stream in range(3):
            for turn in turns(Planner(s, 0, stream), 300):
                if turn.turn == 0:
                    heads.append(turn.user_text[:15])
    assert len(heads) == len(set(heads))


def test_text_is_real_prose_and_code():
    [chat] = scenarios.load("chat")
    words = " ".join(t.user_text for t in turns(Planner(chat, 0), 30)).split()
    assert len(set(words)) > 2000  # not a repeated filler
    assert sum(w in ("the", "of", "is", "a") for w in words) > 0.03 * len(words)
    [code] = scenarios.load("code")
    text = "\n".join(t.user_text for t in turns(Planner(code, 0), 30))
    assert "def " in text and "return" in text and "```python\n" in text


def test_completions_api_sends_bare_code(tmp_path):
    s = scenario(tmp_path, "api: completions\nworkload: {kind: code, styles: {edit: 0}}\n")
    for turn in turns(Planner(s, 0), 20):
        assert turn.user_text.startswith("# ") and "```" not in turn.user_text.splitlines()[0]


def test_rag_documents_are_shared_across_streams(tmp_path):
    [rag] = scenarios.load("rag")
    a, b = turns(Planner(rag, 0, 0), 300), turns(Planner(rag, 0, 1), 300)
    docs = {}
    for turn in a + b:
        ids = turn.prefix_id.removeprefix("docs:").split(",")
        assert len(ids) == 4
        question = turn.user_text.index("Using only the documents above")
        parts = re.split(r"(?:^|\n)Document (\d+):\n", turn.user_text[:question])
        assert parts[1::2] == ids
        for number, body in zip(parts[1::2], parts[2::2], strict=True):
            assert docs.setdefault(number, body.rstrip("\n")) == body.rstrip("\n")
    assert a[0].system_text == b[0].system_text and count(a[0].system_text) == 64
    inputs = np.array([t.intended_input_tokens for t in a])
    assert 2000 < np.median(inputs) < 8000


def test_rag_reuse_follows_zipf(tmp_path):
    def first_doc_repeats(zipf: float) -> float:
        s = scenario(tmp_path, f"workload: {{kind: rag, documents: {{pool: 100, zipf: {zipf}}}}}\n")
        firsts = [t.prefix_id.split(",")[0] for t in turns(Planner(s, 0), 400)]
        return 1 - len(set(firsts)) / len(firsts)

    uniform, skewed = first_doc_repeats(0), first_doc_repeats(1.5)
    assert skewed > uniform + 0.1


def poisson_like(tmp_path: Path, rate: str, stages: str = "") -> Scenario:
    return scenario(
        tmp_path,
        f"workload: {{kind: chat, turns: 1, input_tokens: 64, output_tokens: 8}}\n"
        f"load: {{rate: {rate}{stages}}}\n",
    )


def gaps_of(s: Scenario, n: int, **kw) -> np.ndarray:
    times = [t.arrival_s for t in itertools.islice(Planner(s, 0).arrivals(**kw), n)]
    assert times == sorted(times)
    return np.diff([0.0, *times])


@pytest.mark.slow
def test_poisson_arrivals(tmp_path):
    gaps = gaps_of(poisson_like(tmp_path, "{rps: 20}"), 10_000)
    assert 1 / gaps.mean() == pytest.approx(20, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


@pytest.mark.slow
def test_gamma_arrivals_have_the_cv(tmp_path):
    gaps = gaps_of(poisson_like(tmp_path, "{rps: 5, arrival: gamma, cv: 3}"), 10_000)
    assert 1 / gaps.mean() == pytest.approx(5, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


def test_constant_arrivals(tmp_path):
    gaps = gaps_of(poisson_like(tmp_path, "{rps: 4, arrival: constant}"), 100)
    assert np.allclose(gaps, 0.25)


def test_workers_partition_one_process(tmp_path):
    s = poisson_like(tmp_path, "{rps: 50, arrival: gamma, cv: 4}")
    whole = [t.arrival_s for t in itertools.islice(Planner(s, 0).arrivals(), 2000)]
    horizon = whole[-1]
    shares = []
    for worker in range(4):
        mine = Planner(s, 0, stream=worker).arrivals(rate_scale=0.25)
        shares.append(
            [t.arrival_s for t in itertools.takewhile(lambda t: t.arrival_s <= horizon, mine)]
        )
    merged = sorted(itertools.chain.from_iterable(shares))
    assert merged == whole
    assert all(300 < len(share) < 700 for share in shares)


def test_stages_set_the_rate_over_time(tmp_path):
    s = scenario(
        tmp_path,
        """
        workload: {kind: chat, turns: 1, input_tokens: 64, output_tokens: 8}
        load:
          rate: {rps: 10}
          stages:
            - {name: warm, duration: 20s, rate: {rps: 5}}
            - {name: idle, duration: 10s, users: 2}
            - {name: peak, duration: 20s}
        """,
    )
    times = np.array([t.arrival_s for t in Planner(s, 0).arrivals()])
    assert times.max() < 50
    assert not np.any((times >= 20) & (times < 30))
    assert np.sum(times < 20) == pytest.approx(100, abs=35)
    assert np.sum(times >= 30) == pytest.approx(200, abs=50)


def test_arrival_errors():
    [chat] = scenarios.load("chat")
    with pytest.raises(ValueError, match="no open-loop rate"):
        next(Planner(chat, 0).arrivals())
    [code] = scenarios.load("code")
    with pytest.raises(ValueError, match="rate_scale"):
        next(Planner(code, 0).arrivals(rate_scale=1.5))


def test_sample_requests_are_json_lines():
    import json

    [rag] = scenarios.load("rag")
    rows = list(scenarios.sample_requests([rag], 5))
    assert len(rows) == 5 and all(json.loads(json.dumps(r)) == r for r in rows)
    assert set(rows[0]) == {
        "scenario",
        "conversation",
        "turn",
        "arrival_s",
        "think_time_s",
        "input_tokens",
        "output_tokens",
        "max_tokens",
        "prefix_id",
        "history_messages",
        "preview",
    }
    mixed = scenarios.load("mixed")
    names = [r["scenario"] for r in scenarios.sample_requests(mixed, 600)]
    assert {"chat", "rag", "code"} == set(names)
    assert names == [r["scenario"] for r in scenarios.sample_requests(mixed, 600)]
