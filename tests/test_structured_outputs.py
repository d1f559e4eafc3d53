"""Structured outputs (issue 40, item 2), piece by piece: the scenario's
``structured:`` section and its errors, the planned constraints (a pool
shared by every stream, or a schema per request), the client's check of an
answer, the counts and histograms merged across processes, the validity SLO,
and the simulated engine following each schema, paying its compile once and
breaking answers when told to."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from jsonschema import validators

from slogate import scenarios
from slogate.analysis.documents.summary import structured_block
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.verdict.slo import Verdict, evaluate
from slogate.client.schema_check import SchemaCheck
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios import ScenarioError
from slogate.scenarios.model import Constraint, PlannedTurn, RequestOptions, Threshold, Timeouts
from slogate.scenarios.planner import Planner
from slogate.scenarios.structured import JSON_OBJECT, response_format
from slogate.simengine.grammar import COMPILE_S

MS = 1_000_000
SCENARIO = """\
    name: so
    workload: {kind: chat, turns: 1, input_tokens: 64, output_tokens: 200}
    structured: %s
    """
SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "enum": ["red", "green"]},
        "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}},
        "meta": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
    "required": ["color", "sizes", "meta"],
    "additionalProperties": False,
}


def scenario_path(tmp_path: Path, structured: str, api: str = "chat") -> Path:
    path = tmp_path / "so.yaml"
    path.write_text(textwrap.dedent(SCENARIO % structured) + f"api: {api}\n")
    return path


def problems(path: Path) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        scenarios.load(path)
    assert all(p.file == str(path) for p in info.value.problems)
    return {p.path: p.message for p in info.value.problems}


def constraints(path: Path, stream: int = 0, n: int = 200) -> list[Constraint]:
    [scenario] = scenarios.load(path)
    planner = Planner(scenario, scenario.seed, stream)
    found = []
    for _ in range(n):
        (turn,) = planner.conversation().turns
        assert turn.constraint is not None
        found.append(turn.constraint)
    return found


def schema_of(c: Constraint) -> dict:
    assert c.response_format is not None
    return c.response_format["json_schema"]["schema"]


# -- the scenario --------------------------------------------------------------------


def test_a_pool_is_shared_by_every_stream_and_the_share_holds(tmp_path):
    path = scenario_path(tmp_path, "{share: 0.4, pool: 3}")
    first, second = constraints(path, 0), constraints(path, 1)
    keys = {c.key for c in first + second if c.response_format is not None}
    assert len(keys) == 3  # one pool for all streams
    constrained = sum(c.response_format is not None for c in first)
    assert 60 <= constrained <= 100  # 40% of 200, well inside binomial spread
    assert [c.key for c in first] != [c.key for c in second]  # each stream draws its own


def test_generated_schemas_are_valid_nested_with_enums_and_arrays(tmp_path):
    picked = [c for c in constraints(scenario_path(tmp_path, "{share: 1, pool: 8}"))]
    for c in picked:
        schema = schema_of(c)
        validators.validator_for(schema).check_schema(schema)
        kinds = [p.get("type") for p in schema["properties"].values()]
        assert {"string", "array", "object"} <= set(kinds)
        assert all("enum" in p for p in schema["properties"].values() if p["type"] == "string")
        assert c.response_format is not None
        assert c.response_format["json_schema"]["name"] == f"slogate_{c.key}"


def test_unique_schemas_never_repeat(tmp_path):
    path = scenario_path(tmp_path, "{share: 1, pool: unique}")
    picked = constraints(path, 0) + constraints(path, 1)
    assert len({c.key for c in picked}) == len(picked) == 400
    assert len({json.dumps(schema_of(c), sort_keys=True) for c in picked}) == 400


def test_json_object_and_schema_files(tmp_path):
    [c] = {
        c.key: c for c in constraints(scenario_path(tmp_path, "{share: 1, format: json_object}"))
    }.values()
    assert c.response_format == {"type": "json_object"} and c.key == JSON_OBJECT
    (tmp_path / "schemas.json").write_text(json.dumps([SCHEMA, {"type": "array"}]))
    picked = constraints(scenario_path(tmp_path, "{share: 1, schema_file: schemas.json}"))
    assert {json.dumps(schema_of(c)) for c in picked} == {json.dumps(SCHEMA), '{"type": "array"}'}


@pytest.mark.parametrize(
    ("structured", "key", "words"),
    [
        ("{share: 0}", "structured.share", "expected a number > 0"),
        ("{share: 0.5, pool: many}", "structured.pool", "or 'unique'"),
        ("{share: 0.5, format: xml}", "structured.format", "json_schema"),
        ("{share: 0.5, format: json_object, pool: 3}", "structured.pool", "json_object"),
        ("{share: 0.5, schema_file: nowhere.json}", "structured.schema_file", "nowhere.json"),
        ("{share: 0.5, schema_file: bad.json}", "structured.schema_file", "bad.json entry 1"),
        ("{share: 0.5, schema_file: bad.json, pool: 2}", "structured.pool", "file"),
        ("{share: 0.5, rate: 2}", "structured.rate", "unknown key"),
    ],
)
def test_bad_sections_name_the_key_and_the_file(tmp_path, structured, key, words):
    (tmp_path / "bad.json").write_text(json.dumps([SCHEMA, {"type": "banana"}]))
    found = problems(scenario_path(tmp_path, structured))
    assert key in found, found
    assert words in found[key]


def test_a_bad_schema_says_where_inside_it(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps([SCHEMA, {"type": "banana"}]))
    found = problems(scenario_path(tmp_path, "{share: 1, schema_file: bad.json}"))
    message = found["structured.schema_file"]
    assert str(tmp_path / "bad.json") in message and "not a valid JSON Schema at type" in message


def test_only_chat_sends_a_response_format(tmp_path):
    found = problems(scenario_path(tmp_path, "{share: 1}", api="completions"))
    assert "api: chat" in found["structured"]


def test_the_validity_slo_is_a_minimum_fraction(tmp_path):
    path = scenario_path(tmp_path, "{share: 1}")
    path.write_text(path.read_text() + "slo: {schema_validity: {min: 0.99}}\n")
    [scenario] = scenarios.load(path)
    assert scenario.slo.thresholds == (Threshold("schema_validity", "fraction", 0.99, "min"),)
    path.write_text(path.read_text().replace("0.99", "1.5"))
    assert "slo.schema_validity.min" in problems(path)


# -- the client's check -----------------------------------------------------------------


def test_the_check_names_what_broke_the_schema():
    check = SchemaCheck()
    schema = Constraint(response_format("k", SCHEMA), "k")
    good = json.dumps({"color": "red", "sizes": [1, 2], "meta": {"ok": True}})
    assert check.problem(schema, good, "stop") is None
    wrong = json.dumps({"color": "blue", "sizes": [1], "meta": {"ok": True}})
    assert (
        check.problem(schema, wrong, "stop") == "$['color']: 'blue' is not one of ['red', 'green']"
    )
    nested = json.dumps({"color": "red", "sizes": [1, 20], "meta": {"ok": True}})
    assert (
        check.problem(schema, nested, "stop")
        == "$['sizes'][1]: 20 is greater than the maximum of 9"
    )
    cut = good[:-3]
    reason = check.problem(schema, cut, "length")
    assert reason is not None and reason.startswith("not JSON (cut at max_tokens)")
    assert check.problem(schema, good[:-1], "stop").startswith("not JSON: ")
    as_object = Constraint({"type": JSON_OBJECT}, JSON_OBJECT)
    assert check.problem(as_object, "[1]", "stop") == "expected a JSON object, got list"
    assert check.problem(as_object, '{"a": 1}', "stop") is None


def test_first_sight_is_per_schema():
    check = SchemaCheck()
    assert [check.first_sight(k) for k in "abab"] == [True, True, False, False]


# -- counts, histograms, the SLO ---------------------------------------------------------


def finished(ttft_ms: int, constrained: bool | None, first: bool = False, error: str | None = None):
    record = RequestRecord("so", start_ns=0, conversation=ttft_ms, turn=0)
    record.chunk_ns = [ttft_ms * MS, (ttft_ms + 10) * MS, (ttft_ms + 20) * MS]
    record.chunk_chars = [4, 4, 4]
    record.end_ns = (ttft_ms + 20) * MS
    record.output_tokens = 3
    record.constrained, record.schema_first, record.schema_error = constrained, first, error
    return record


RECORDS = [
    finished(100, True, first=True),
    finished(102, True, first=True, error="$['color']: 'blue' is not one of ['red']"),
    finished(40, True),
    finished(41, True),
    finished(42, True),
    finished(20, False),
    finished(21, False),
]


def test_the_block_splits_ttft_and_shows_the_compile_gap():
    recorder = Recorder()
    for record in RECORDS:
        recorder.record(record, wall_s=1.0)
    block = structured_block(recorder.bucket("so", "all"))
    assert block is not None
    assert (block["constrained"], block["valid"], block["invalid"]) == (5, 4, 1)
    assert block["validity"] == 0.8 and block["schema_first"] == 2
    assert block["invalid_samples"] == [
        "conversation 102 turn 0: $['color']: 'blue' is not one of ['red']"
    ]
    assert (
        block["ttft_constrained_ms"]["count"] == 5 and block["ttft_unconstrained_ms"]["count"] == 2
    )
    assert block["tpot_constrained_ms"]["count"] == 5
    assert (
        block["ttft_schema_first_ms"]["count"] == 2 and block["ttft_schema_cached_ms"]["count"] == 3
    )
    assert block["compile_gap_ms"] == pytest.approx(100 - 41, abs=0.2)


def test_a_scenario_without_structured_outputs_has_no_block():
    recorder = Recorder()
    recorder.record(finished(30, None), wall_s=1.0)
    bucket = recorder.bucket("so", "all")
    assert structured_block(bucket) is None
    assert "ttft_unconstrained" not in bucket.histograms  # nothing recorded for it


def test_counts_merge_exactly_and_the_slo_fails_below_its_minimum():
    single, master = Recorder(), Recorder()
    workers = [Recorder(), Recorder()]
    for i, record in enumerate(RECORDS):
        single.record(record, wall_s=1.0)
        workers[i % 2].record(record, wall_s=1.0)
    for worker in workers:
        master.absorb(worker.drain())
    bucket = master.bucket("so", "all")
    assert structured_block(bucket) == structured_block(single.bucket("so", "all"))
    failing = evaluate("so", Threshold("schema_validity", "fraction", 0.9, "min"), bucket, 1.0)
    assert (failing.verdict, failing.value, failing.count) == (Verdict.FAIL, 0.8, 5)
    passing = evaluate("so", Threshold("schema_validity", "fraction", 0.75, "min"), bucket, 1.0)
    assert passing.verdict == Verdict.PASS


# -- the simulated engine -----------------------------------------------------------------


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine(speedup=1)
    try:
        yield running
    finally:
        running.stop()


def send_all(engine: EngineProcess, constraints: list[Constraint]) -> list[RequestRecord]:
    client = StreamClient(
        engine.url,
        "chat",
        "meta-llama/Llama-3.1-8B-Instruct",
        RequestOptions(),
        Timeouts(first_token_s=30, stall_s=30),
        1,
    )
    turns = [
        PlannedTurn("so", i, 0, f"question {i}", 200, 32, 200, constraint=c)
        for i, c in enumerate(constraints)
    ]
    try:
        return [client.send(turn).record for turn in turns]
    finally:
        client.close()


def test_the_engine_follows_each_schema_and_compiles_it_once(engine):
    """Every answer meets its schema and ends with EOS; a schema's first
    request waits its compile, the next ones with it do not."""
    other = dict(SCHEMA, required=["color"])
    picked = [Constraint(response_format(k, s), k) for k, s in (("a", SCHEMA), ("b", other))]
    records = send_all(
        engine, [picked[0], picked[0], picked[0], picked[1], picked[1], Constraint()]
    )
    assert all(r.ok for r in records), [r.error_message for r in records]
    assert [r.schema_error for r in records] == [None] * 6
    assert [r.finish_reason for r in records[:5]] == ["stop"] * 5
    assert [r.schema_first for r in records] == [True, False, False, True, False, False]
    assert records[5].constrained is False
    ttft = [(r.chunk_ns[0] - r.start_ns) / 1e9 for r in records]
    # the compile is COMPILE_S of model time at speedup 1; the rest of TTFT is alike
    assert ttft[0] - max(ttft[1:3]) > COMPILE_S * 0.6, ttft
    assert ttft[3] - ttft[4] > COMPILE_S * 0.6, ttft


def test_a_json_object_answer_is_an_object(engine):
    records = send_all(engine, [Constraint({"type": JSON_OBJECT}, JSON_OBJECT)] * 2)
    assert [(r.ok, r.schema_error) for r in records] == [(True, None)] * 2


def test_the_fault_breaks_the_answers_and_the_check_catches_them(engine):
    engine.set_faults(invalid_json_rate=1.0)
    try:
        records = send_all(engine, [Constraint(response_format("c", SCHEMA), "c")] * 3)
    finally:
        engine.clear_faults()
    assert all(r.ok for r in records)
    assert all(
        r.schema_error is not None and r.schema_error.startswith("not JSON: ") for r in records
    )
