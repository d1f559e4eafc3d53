"""Traces in the formats users already have: named layouts without columns,
lengths-only tables without times, skipped rows, and errors naming the file,
line and field."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from loadruns import slogate

from slogate import scenarios
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, tokenizer_counter

COUNT = tokenizer_counter(str(LOCAL_TOKENIZER))
TIMES = [t for t, _, _ in datasets.ROWS]
INPUTS = [i for _, i, _ in datasets.ROWS]
OUTPUTS = [o for _, _, o in datasets.ROWS]
NAMED = {
    "mooncake": datasets.mooncake,
    "burstgpt": lambda p: datasets.burstgpt(p, failed_row=False),
    "azure": lambda p: datasets.azure(p, 2023),
}


def scenario(tmp_path: Path, workload: str, load: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"workload: {workload}\nload: {load}\n")
    return path


def problems(path: Path) -> dict[str, str]:
    with pytest.raises(scenarios.ScenarioError) as info:
        scenarios.load(path)
    return {p.path: p.message for p in info.value.problems}


@pytest.mark.parametrize(
    "write",
    [
        datasets.mooncake,
        lambda p: datasets.burstgpt(p, failed_row=False),
        lambda p: datasets.azure(p, 2023),
        lambda p: datasets.azure(p, 2024),
    ],
    ids=["mooncake", "burstgpt", "azure-2023", "azure-2024"],
)
def test_named_formats_replay_their_times_and_lengths_without_columns(tmp_path, write):
    file = write(tmp_path)
    fmt = {".jsonl": "mooncake", ".csv": "burstgpt" if "burst" in file.name else "azure"}
    path = scenario(
        tmp_path,
        f"{{kind: trace, file: {file.name}, format: {fmt[file.suffix]}}}",
        "{rate: {arrival: trace, speedup: 1}}",
    )
    rows = list(scenarios.sample_requests(scenarios.load(path), len(TIMES)))
    assert [r["arrival_s"] for r in rows] == pytest.approx(TIMES, abs=1e-6)
    assert [r["input_tokens"] for r in rows] == INPUTS
    assert [r["output_tokens"] for r in rows] == OUTPUTS


def test_planned_prompts_have_the_recorded_lengths_with_the_bundled_tokenizer(tmp_path):
    path = scenario(
        tmp_path,
        f"{{kind: trace, file: {datasets.mooncake(tmp_path).name}, format: mooncake}}",
        "{users: 1}",
    )
    [s] = scenarios.load(path)
    planner = scenarios.Planner(s, seed=3)
    turns = [planner.conversation().turns[0] for _ in range(len(INPUTS))]
    for turn in turns:
        assert (
            abs(COUNT(turn.user_text) - turn.intended_input_tokens)
            <= 0.01 * turn.intended_input_tokens
        )
    assert sorted(t.intended_input_tokens for t in turns) == sorted(INPUTS)
    # hash_ids [1, 2] (1200 and 1100 tokens) share two 512-token blocks; 900
    # tokens fit one block of [1, 2, 3]; [4] shares nothing with [1, 2]
    text = {t.intended_input_tokens: t.user_text for t in turns}
    shared = {n: COUNT(common_start(text[1200], text[n])) for n in (1100, 900, 2000)}
    assert shared[1100] == pytest.approx(1024, abs=2)
    assert shared[900] == pytest.approx(512, abs=2)
    assert shared[2000] <= 2


def common_start(a: str, b: str) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return a[:n]


@pytest.mark.slow
def test_a_lengths_only_table_samples_its_rows_in_closed_loop(tmp_path):
    file = datasets.lengths_only(tmp_path)
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}}}", "{users: 2}")
    done = slogate("scenario", "sample", str(path), "-n", "10")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    pairs = [(r["input_tokens"], r["output_tokens"]) for r in rows]
    recorded = list(zip(INPUTS, OUTPUTS, strict=True))
    start = recorded.index(pairs[0])  # each user starts at its own row, then walks the file
    assert pairs == [recorded[(start + k) % len(recorded)] for k in range(10)]
    assert all(r["arrival_s"] is None for r in rows)
    check = slogate("scenario", "check", str(path))
    assert check.returncode == 0, check.stderr
    assert "lengths.csv: 5 rows read, 5 used, 0 skipped" in check.stdout
    assert "no time column" in check.stdout
    assert "input tokens    p50    1200  p90    2000  p99    2000  max    2000" in check.stdout


@pytest.mark.parametrize(
    ("rate", "cv"),
    [("{rps: 20, arrival: poisson}", 1.0), ("{rps: 20, arrival: gamma, cv: 3}", 3.0),
     ("{rps: 20, arrival: constant}", 0.0)],
)  # fmt: skip
def test_a_trace_without_times_replays_at_any_arrival_process(tmp_path, rate, cv):
    file = datasets.lengths_only(tmp_path)
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}}}", f"{{rate: {rate}}}")
    rows = list(scenarios.sample_requests(scenarios.load(path), 4000))
    gaps = np.diff([r["arrival_s"] for r in rows])
    assert 1 / gaps.mean() == pytest.approx(20, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=0.1 * max(cv, 1))
    assert [r["input_tokens"] for r in rows[:10]] == (INPUTS * 2)  # the rows in file order


def test_arrival_trace_on_a_trace_without_times_is_a_configuration_error(tmp_path):
    file = datasets.lengths_only(tmp_path)
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}}}", "{rate: {arrival: trace}}")
    message = problems(path)["load.rate.arrival"]
    assert "lengths.csv has no time column" in message and "arrival: poisson" in message
    done = slogate("scenario", "check", str(path))
    assert done.returncode == 2 and "lengths.csv has no time column" in done.stderr


def test_burstgpt_failed_rows_are_kept_or_skipped(tmp_path):
    file = datasets.burstgpt(tmp_path)
    workload = f"{{kind: trace, file: {file.name}, format: burstgpt"
    [kept] = scenarios.load(scenario(tmp_path, workload + "}", "{users: 1}"))
    assert kept.workload.trace.rows == 6
    assert list(kept.workload.trace.output_tokens[-1:]) == [1]  # sent with max_tokens 1
    assert (
        "1 rows with 0 output tokens are replayed with max_tokens 1" in kept.workload.report.notes
    )
    [skipped] = scenarios.load(scenario(tmp_path, workload + ", failed: skip}", "{users: 1}"))
    report = skipped.workload.report
    assert skipped.workload.trace.rows == 5 and list(skipped.workload.trace.input_tokens) == INPUTS
    assert (report.read, report.used) == (6, 5)
    assert dict(report.skipped) == {"failed request (0 output tokens)": 1}


def test_burstgpt_rows_of_other_models_are_left_out_on_request(tmp_path):
    file = datasets.burstgpt(tmp_path)  # five ChatGPT rows, then a failed GPT-4 row
    workload = f"{{kind: trace, file: {file.name}, format: burstgpt, models: [ChatGPT]}}"
    [s] = scenarios.load(scenario(tmp_path, workload, "{users: 1}"))
    assert list(s.workload.trace.input_tokens) == INPUTS
    assert dict(s.workload.report.skipped) == {"model not in models (ChatGPT)": 1}
    only = f"{{kind: trace, file: {file.name}, format: burstgpt, models: [GPT-4], failed: skip}}"
    assert problems(scenario(tmp_path, only, "{users: 1}"))["workload.file"] == (
        "burstgpt.csv: no row left to replay (5 model not in models (GPT-4); "
        "1 failed request (0 output tokens))"
    )
    lengths = datasets.lengths_only(tmp_path)
    path = scenario(tmp_path, f"{{kind: trace, file: {lengths.name}, models: [m]}}", "{users: 1}")
    assert problems(path)["workload.models"].startswith("models: needs a model column")


def test_named_formats_refuse_columns_and_other_layouts(tmp_path):
    file = datasets.mooncake(tmp_path)
    path = scenario(
        tmp_path,
        f"{{kind: trace, file: {file.name}, format: mooncake, columns: {{time: t}}}}",
        "{users: 1}",
    )
    assert "format: mooncake has its own columns" in problems(path)["workload.columns"]
    azure = datasets.azure(tmp_path, 2023)
    path = scenario(
        tmp_path, f"{{kind: trace, file: {azure.name}, format: burstgpt}}", "{users: 1}"
    )
    message = problems(path)["workload.file"]
    assert "column 'Timestamp' not in azure2023.csv (columns: TIMESTAMP" in message


def test_a_generic_trace_without_a_known_length_column_names_its_columns(tmp_path):
    file = tmp_path / "odd.csv"
    file.write_text("when,prompt_size,answer_size\n0,10,5\n")
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}}}", "{users: 1}")
    message = problems(path)["workload.columns.input_tokens"]
    assert message == (
        "no input tokens column in odd.csv (columns: when, prompt_size, answer_size); "
        "name it in workload.columns.input_tokens"
    )
    named = (
        f"{{kind: trace, file: {file.name}, columns: {{input_tokens: prompt_size, "
        "output_tokens: answer_size}}"
    )
    [s] = scenarios.load(scenario(tmp_path, named, "{users: 1}"))
    assert s.workload.trace.times_s is None and list(s.workload.trace.input_tokens) == [10]
    chats = datasets.sharegpt(tmp_path, datasets.dialogues(count=1), jsonl=True)
    path = scenario(tmp_path, f"{{kind: trace, file: {chats.name}}}", "{users: 1}")
    message = problems(path)["workload.columns.input_tokens"]
    assert message.endswith("(a file of recorded conversations replays with kind: conversations)")


@pytest.mark.parametrize(
    ("fmt", "field"),
    [("burstgpt", "Request tokens"), ("mooncake", "input_length"), ("azure", "ContextTokens")],
)
def test_a_malformed_row_names_file_line_and_field(tmp_path, fmt, field):
    file = NAMED[fmt](tmp_path)
    lines = file.read_text().splitlines()
    if fmt == "mooncake":  # line 4 is the fourth row
        lines[3] = json.dumps({**json.loads(lines[3]), field: "many"})
    else:  # line 4 is the third row, after the header
        cells = lines[3].split(",")
        cells[lines[0].split(",").index(field)] = "many"
        lines[3] = ",".join(cells)
    file.write_text("\n".join(lines) + "\n")
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}, format: {fmt}}}", "{users: 1}")
    message = problems(path)["workload.file"]  # a named format's columns are fixed
    assert message == f"{file.name} line 4, field {field!r}: expected a number >= 0, got 'many'"


def test_a_file_with_a_named_formats_columns_is_read_in_that_format(tmp_path):
    """Read as plain JSONL, a Mooncake file's milliseconds would pass for seconds."""
    file = datasets.mooncake(tmp_path)
    path = scenario(tmp_path, f"{{kind: trace, file: {file.name}}}", "{rate: {arrival: trace}}")
    [s] = scenarios.load(path)
    rows = list(scenarios.sample_requests([s], 2))
    assert [r["arrival_s"] for r in rows] == [0.0, 0.25]
    assert rows[0]["prefix_id"].startswith("blocks:2:")
    assert s.workload.report.notes[0] == "format: mooncake"
    named = f"{{kind: trace, file: {file.name}, columns: {{time: timestamp}}}}"
    [plain] = scenarios.load(scenario(tmp_path, named, "{rate: {arrival: trace}}"))
    assert list(plain.workload.trace.times_s[:2]) == [0.0, 250.0]  # as named: seconds
