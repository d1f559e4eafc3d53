"""Recorded conversations (ShareGPT JSON/JSONL, OpenAI messages JSONL) replayed
as sessions: history as recorded or live, output lengths, filters, sampling,
skipped conversations and malformed records."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from loadruns import slogate

from slogate import scenarios
from slogate.client.streaming import chat_messages
from slogate.scenarios.datasets.counts import token_counts
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, tokenizer_counter

COUNT = tokenizer_counter(str(LOCAL_TOKENIZER))
DIALOGUES = datasets.dialogues()
WRITERS = {
    "sharegpt-json": lambda p: datasets.sharegpt(p, DIALOGUES),
    "sharegpt-jsonl": lambda p: datasets.sharegpt(p, DIALOGUES, jsonl=True),
    "openai": lambda p: datasets.openai_messages(p, DIALOGUES),
}


def scenario(tmp_path: Path, file: Path, extra: str = "", load: str = "{users: 1}") -> Path:
    path = tmp_path / "conv.yaml"
    path.write_text(f"workload: {{kind: conversations, file: {file.name}{extra}}}\nload: {load}\n")
    return path


def problems(path: Path) -> dict[str, str]:
    with pytest.raises(scenarios.ScenarioError) as info:
        scenarios.load(path)
    return {p.path: p.message for p in info.value.problems}


def sessions(path: Path, count: int, seed: int = 0) -> list[scenarios.Conversation]:
    [s] = scenarios.load(path)
    planner = scenarios.Planner(s, seed)
    return [planner.conversation() for _ in range(count)]


def recorded_of(conversation: scenarios.Conversation) -> list[tuple[str, str]]:
    """The dialogue a planned session replays, found by its second user message
    (the first carries the session's tag)."""
    return next(d for d in DIALOGUES if conversation.turns[0].user_text.endswith(d[-6][1]))


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_history_grows_turn_by_turn_as_recorded(tmp_path, fmt):
    path = scenario(tmp_path, WRITERS[fmt](tmp_path))
    for conversation in sessions(path, len(DIALOGUES)):
        recorded = recorded_of(conversation)
        system = recorded[0][1] if recorded[0][0] == "system" else None
        pairs = [m for m in recorded if m[0] != "system"]
        tag = conversation.turns[0].user_text[: -len(pairs[0][1])]
        assert tag.startswith("[") and tag.endswith("]\n") and len(tag) == 15
        sent = [("user", tag + pairs[0][1]), *pairs[1:]]
        assert len(conversation.turns) == 3
        for k, turn in enumerate(conversation.turns):
            messages = chat_messages(turn, [{"role": "user", "content": "ignored: live"}])
            expected = ([("system", system)] if system else []) + sent[: 2 * k + 1]
            assert [(m["role"], m["content"]) for m in messages] == expected
            assert turn.intended_input_tokens == sum(COUNT(text) for _, text in expected)
            assert turn.max_tokens == COUNT(pairs[2 * k + 1][1])  # the recorded reply's length


def test_live_history_sends_the_engines_replies_and_plans_with_the_output_lengths(tmp_path):
    file = datasets.sharegpt(tmp_path, DIALOGUES)
    path = scenario(tmp_path, file, ", history: live, output_tokens: 50, think_time_s: 0.5")
    [conversation] = sessions(path, 1)
    recorded = [m for m in recorded_of(conversation) if m[0] != "system"]
    live = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "engine reply"}]
    second = conversation.turns[1]
    assert second.history is None and second.max_tokens == 50 and second.think_time_s == 0.5
    assert chat_messages(second, live)[-3:] == [*live, {"role": "user", "content": recorded[2][1]}]
    first = conversation.turns[0]
    assert second.intended_input_tokens == first.intended_input_tokens + 50 + COUNT(recorded[2][1])


def test_output_lengths_are_capped_by_max_output_tokens(tmp_path):
    file = datasets.openai_messages(tmp_path, DIALOGUES)
    replies = [COUNT(t) for d in DIALOGUES for r, t in d if r == "assistant"]
    cap = sorted(replies)[len(replies) // 2]
    planned = sessions(scenario(tmp_path, file, f", max_output_tokens: {cap}"), len(DIALOGUES))
    outputs = sorted(t.max_tokens for c in planned for t in c.turns)
    assert outputs == sorted(min(r, cap) for r in replies)
    drawn = scenario(tmp_path, file, ", output_tokens: {dist: uniform, min: 5, max: 9}")
    assert {t.max_tokens for c in sessions(drawn, 4) for t in c.turns} <= set(range(5, 10))


def messy(tmp_path: Path) -> Path:
    good = [("user", "Hello there, how are you?"), ("assistant", "Fine, thanks.")]
    conversations = [
        good,
        [("assistant", "I start."), ("user", "Odd.")],
        [("user", "One."), ("user", "Two."), ("assistant", "Three.")],
        [("user", "Hi"), ("assistant", "")],
        [*good, ("user", "Are you there?")],  # kept, its unanswered last message dropped
        [],
    ]
    records = [
        {"conversations": [{"from": {"user": "human"}.get(r, "gpt"), "value": t} for r, t in c]}
        for c in conversations
    ]
    records.append({"conversations": [{"from": "narrator", "value": "x"}]})
    records.append({"messages": [{"role": "user", "content": "weather?"}, {"role": "tool"}]})
    image = [{"type": "image_url", "image_url": {"url": "data:"}}]
    records.append({"messages": [{"role": "user", "content": image}]})
    path = tmp_path / "messy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_conversations_that_cannot_be_replayed_are_skipped_with_the_reason(tmp_path):
    [s] = scenarios.load(scenario(tmp_path, messy(tmp_path)))
    report = scenarios.dataset_report(s.workload)
    assert (report.read, report.used) == (9, 2)
    assert dict(report.skipped) == {
        "starts with an assistant message": 1,
        "two user messages in a row": 1,
        "an empty message": 1,
        "no user message": 1,
        "unknown speaker 'narrator'": 1,
        "tool calls": 1,
        "non-text content (image_url)": 1,
    }
    assert report.notes == ("final user messages without a reply, dropped: 1",)
    done = slogate("scenario", "check", str(tmp_path / "conv.yaml"))
    assert done.returncode == 0, done.stderr
    assert "messy.jsonl: 9 conversations read, 2 used, 7 skipped" in done.stdout
    assert "skipped 1: tool calls" in done.stdout and "turns           p50" in done.stdout


@pytest.mark.parametrize(
    ("fmt", "break_it", "message"),
    [
        ("sharegpt-json", lambda r: r[1]["conversations"][2].update(value=5),
         "sharegpt.json line {line}, field 'conversations[2].value': expected a string, got 5"),
        ("sharegpt-jsonl", lambda r: r[2].update(conversations="hi"),
         "sharegpt.jsonl line 3, field 'conversations': expected a list of messages, got 'hi'"),
        ("openai", lambda r: r[3]["messages"][1].update(content=5),
         "messages.jsonl line 4, field 'messages[1].content': expected a string or a list "
         "of parts, got 5"),
        ("openai", lambda r: r[0]["messages"][0].pop("role"),
         "messages.jsonl line 1, field 'messages[0].role': expected a string, got None"),
    ],
)  # fmt: skip
def test_a_malformed_record_names_file_line_and_field(tmp_path, fmt, break_it, message):
    file = WRITERS[fmt](tmp_path)
    if file.suffix == ".json":
        records = json.loads(file.read_text())
        break_it(records)
        file.write_text(json.dumps(records, indent=2))
        lines = file.read_text().splitlines()
        # the second item of the list starts on the line after the first's closing brace
        line = next(i for i, text in enumerate(lines, 1) if text == "  },") + 1
    else:
        records = [json.loads(text) for text in file.read_text().splitlines()]
        break_it(records)
        file.write_text("".join(json.dumps(r) + "\n" for r in records))
        line = None
    found = problems(scenario(tmp_path, file))
    assert found["workload.file"] == message.format(line=line)


def test_filters_and_seeded_sampling(tmp_path):
    dialogues = [d[: 1 + 2 * (n % 3 + 1)] if d[0][0] == "system" else d[: 2 * (n % 3 + 1)]
                 for n, d in enumerate(datasets.dialogues(count=12, chars=300))]  # fmt: skip
    file = datasets.sharegpt(tmp_path, dialogues)
    [s] = scenarios.load(scenario(tmp_path, file, ", filter: {min_turns: 2, max_turns: 2}"))
    report = scenarios.dataset_report(s.workload)
    assert dict(report.skipped) == {
        "fewer than min_turns (2) turns": 4,
        "more than max_turns (2) turns": 4,
    }
    assert {len(c.turns) for c in s.workload.data.conversations} == {2}
    tokens = sorted(
        c.tokens for c in scenarios.load(scenario(tmp_path, file))[0].workload.data.conversations
    )
    bound = tokens[6]
    [small] = scenarios.load(scenario(tmp_path, file, f", filter: {{max_tokens: {bound}}}"))
    assert len(small.workload.data.conversations) == 7
    assert all(c.tokens <= bound for c in small.workload.data.conversations)

    sampled = scenario(tmp_path, file, ", sample: 3")
    first = {c.turns[-1].user_text for c in sessions(sampled, 30, seed=1)}
    assert len(first) == 3  # 30 sessions walk the same 3 conversations
    assert first == {c.turns[-1].user_text for c in sessions(sampled, 30, seed=1)}
    others = [{c.turns[-1].user_text for c in sessions(sampled, 9, seed=s)} for s in range(2, 6)]
    assert any(o != first for o in others)
    assert (
        "expected at most the 12 conversations"
        in problems(scenario(tmp_path, file, ", sample: 13"))["workload.sample"]
    )


def test_open_loop_replays_every_turn_with_its_recorded_history(tmp_path):
    file = datasets.sharegpt(tmp_path, DIALOGUES, jsonl=True)
    path = scenario(tmp_path, file, load="{rate: {rps: 5, arrival: gamma, cv: 2}}")
    rows = list(scenarios.sample_requests(scenarios.load(path), 24))
    assert [r["history_messages"] for r in rows] == [0, 2, 4] * 8
    assert [r["turn"] for r in rows] == [0, 1, 2] * 8
    # turns of one pass over a conversation share its tag; the next pass gets a new one
    tags = [r["preview"][:14] for r in rows[::3]]
    assert len(set(tags)) == 8


def test_configuration_errors(tmp_path):
    file = datasets.sharegpt(tmp_path, DIALOGUES)
    live_open = scenario(tmp_path, file, ", history: live", load="{rate: 2}")
    assert "needs closed loop" in problems(live_open)["workload.history"]
    path = scenario(tmp_path, file)
    path.write_text("api: completions\n" + path.read_text())
    assert "set api: chat" in problems(path)["api"]
    path = scenario(tmp_path, file, ", filter: {min_turns: 3, max_turns: 2}")
    assert problems(path)["workload.filter.max_turns"] == "expected at least min_turns (3)"
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"conversations": [{"from": "gpt", "value": "hi"}]}) + "\n")
    assert problems(scenario(tmp_path, empty))["workload.file"] == (
        "empty.jsonl: no conversation left to replay (1 starts with an assistant message)"
    )
    unknown = tmp_path / "other.jsonl"
    unknown.write_text(json.dumps({"turns": []}) + "\n")
    assert problems(scenario(tmp_path, unknown))["workload.file"] == (
        "other.jsonl line 1: expected a field among conversations, messages; found ['turns']"
    )


def test_token_counts_are_kept_on_disk_per_texts_and_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    texts = ["Hello world.", "", "A longer text, of prose: it has more tokens."]
    fresh = token_counts(str(LOCAL_TOKENIZER), texts)
    assert fresh == [COUNT(t) for t in texts]
    [entry] = (tmp_path / "cache" / "slogate" / "token-counts").glob("*.npy")
    # the next load reads the entry: numbers written into it come back
    np.save(entry, np.array([7, 8, 9]))
    assert token_counts(str(LOCAL_TOKENIZER), texts) == [7, 8, 9]
    # a damaged entry is counted again; other texts get their own entry
    entry.write_bytes(b"not numpy")
    assert token_counts(str(LOCAL_TOKENIZER), texts) == fresh
    assert token_counts(str(LOCAL_TOKENIZER), texts[:2]) == fresh[:2]
    assert len(list(entry.parent.glob("*.npy"))) == 2
