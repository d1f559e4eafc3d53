"""`slogate run` replaying recorded conversations against a local engine that
keeps every request body: what the engine receives is each conversation's
history, growing turn by turn, as recorded (or with its own replies, live)."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from loadruns import slogate, summary
from recording import REPLY, recording_engine

pytestmark = pytest.mark.slow
DIALOGUES = datasets.dialogues(count=3, turns=3, chars=400)


def run(tmp_path: Path, history: str) -> list[list[tuple[str, str]]]:
    """The messages of every request a 1-user, 4-second run sent."""
    file = datasets.sharegpt(tmp_path, DIALOGUES, jsonl=True)
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(
        f"workload: {{kind: conversations, file: {file.name}, history: {history},"
        " unique_start: false, think_time_s: 0.05}\n"
        "load: {users: 1, duration: 4s}\n"
    )
    with recording_engine() as (server, bodies):
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = slogate(
            "run",
            str(scenario),
            "--host",
            url,
            "--metrics-url",
            "off",
            "--out",
            str(tmp_path / "out"),
        )
    assert done.returncode in (0, 4), done.stderr[-3000:]  # 4: too few samples for p99
    assert summary(tmp_path / "out")["scenarios"]["replay"]["requests"]["failed"] == 0
    return [[(m["role"], m["content"]) for m in body["messages"]] for body in bodies]


def sessions(sent: list[list[tuple[str, str]]]) -> list[list[list[tuple[str, str]]]]:
    """Requests grouped into sessions: a new session starts when the user turn
    count falls back to one."""
    out: list[list] = []
    for messages in sent:
        users = sum(1 for role, _ in messages if role == "user")
        if users == 1 or not out:
            out.append([])
        out[-1].append(messages)
    return out


@pytest.mark.parametrize("history", ["recorded", "live"])
def test_the_engine_receives_the_history_growing_turn_by_turn(tmp_path, history):
    sent = run(tmp_path, history)
    complete = [s for s in sessions(sent) if len(s) == 3]
    assert len(complete) >= 3, sent  # every session the run finished, each 3 turns
    for session in complete:
        recorded = next(d for d in DIALOGUES if d[-2] == session[-1][-1])
        system = [m for m in recorded if m[0] == "system"]
        pairs = [m for m in recorded if m[0] != "system"]
        for k, messages in enumerate(session):
            expected = list(pairs[: 2 * k + 1])
            if history == "live":  # the engine's own replies stand in for the recorded ones
                expected = [(r, REPLY if r == "assistant" else t) for r, t in expected]
            assert messages == system + expected
