"""Small files of every dataset format the scenarios read, written by the tests
(no data is downloaded): traces in the Mooncake, BurstGPT, Azure 2023/2024 and
lengths-only layouts, and conversations as ShareGPT and OpenAI messages."""

from __future__ import annotations

import json
from pathlib import Path

from slogate.scenarios.prompt_text import corpus_text

# (seconds from the start, input tokens, output tokens)
ROWS = [(0.0, 1200, 40), (0.25, 900, 30), (1.5, 2000, 60), (1.75, 1500, 8), (3.0, 1100, 25)]


def mooncake(tmp_path: Path) -> Path:
    path = tmp_path / "mooncake.jsonl"
    blocks = [[1, 2], [1, 2, 3], [4], [1, 5, 6], [1, 2]]
    lines = [
        {"timestamp": int(t * 1000), "input_length": i, "output_length": o, "hash_ids": b}
        for (t, i, o), b in zip(ROWS, blocks, strict=True)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def burstgpt(tmp_path: Path, failed_row: bool = True) -> Path:
    """ROWS, then (when ``failed_row``) a failed request: 0 response tokens."""
    path = tmp_path / "burstgpt.csv"
    rows = [(t, "ChatGPT", i, o, "Conversation log") for t, i, o in ROWS]
    if failed_row:
        rows.append((3.5, "GPT-4", 700, 0, "API log"))
    text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    text += "".join(f"{t},{m},{i},{o},{i + o},{log}\n" for t, m, i, o, log in rows)
    path.write_text(text)
    return path


def azure(tmp_path: Path, year: int) -> Path:
    """Azure 2023 times have 7 fraction digits; 2024 times 6 and a UTC offset."""
    path = tmp_path / f"azure{year}.csv"
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, i, o in ROWS:
        whole, fraction = divmod(t, 1)
        stamp = f"{year}-05-10 10:00:{int(whole):02d}.{int(fraction * 1e6):06d}"
        lines.append(f"{stamp}0,{i},{o}" if year == 2023 else f"{stamp}+00:00,{i},{o}")
    path.write_text("\n".join(lines) + "\n")
    return path


def lengths_only(tmp_path: Path) -> Path:
    path = tmp_path / "lengths.csv"
    rows = "".join(f"{i},{o}\n" for _, i, o in ROWS)
    path.write_text("num_prefill_tokens,num_decode_tokens\n" + rows)
    return path


def passage(start: int, chars: int) -> str:
    """Real prose, cut at spaces: messages long enough that chat framing is
    a small part of each request."""
    text = corpus_text("prose")
    begin = text.index(" ", start) + 1
    return text[begin : text.index(" ", begin + chars)]


def dialogues(count: int = 4, turns: int = 3, chars: int = 2500) -> list[list[tuple[str, str]]]:
    """``count`` conversations of ``turns`` (user, assistant) pairs of real text;
    the first has a system message."""
    out, at = [], 0
    for c in range(count):
        messages = [("system", passage(at, 400))] if c == 0 else []
        at += 997
        for _ in range(turns):
            messages += [
                ("user", passage(at, chars)),
                ("assistant", passage(at + 7919, chars // 3)),
            ]
            at += 1511
        out.append(messages)
    return out


SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}


def sharegpt(tmp_path: Path, conversations: list, jsonl: bool = False) -> Path:
    records = [
        {
            "id": f"c{n}",
            "conversations": [{"from": SHAREGPT_ROLES[r], "value": t} for r, t in messages],
        }
        for n, messages in enumerate(conversations)
    ]
    if jsonl:
        path = tmp_path / "sharegpt.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        path = tmp_path / "sharegpt.json"
        path.write_text(json.dumps(records, indent=2))
    return path


def openai_messages(tmp_path: Path, conversations: list) -> Path:
    path = tmp_path / "messages.jsonl"
    records = [{"messages": [{"role": r, "content": t} for r, t in m]} for m in conversations]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
