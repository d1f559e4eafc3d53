"""A scenario's ``structured:`` section (issue 40, item 2): its errors, each
naming the key and the file, and the constraints it plans: a pool of
generated schemas shared by every stream, a schema per request, json_object,
a file's schemas, on the scenario's share of requests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from jsonschema import validators
from structured_cases import SCHEMA

from slogate import scenarios
from slogate.scenarios import ScenarioError
from slogate.scenarios.model import Constraint, Threshold
from slogate.scenarios.planner import Planner
from slogate.scenarios.structured import JSON_OBJECT

SCENARIO = """\
    name: so
    workload: {kind: chat, turns: 1, input_tokens: 64, output_tokens: 200}
    structured: %s
    """


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


def test_the_sample_shows_what_each_request_sends(tmp_path):
    [scenario] = scenarios.load(scenario_path(tmp_path, "{share: 0.5, format: json_object}"))
    rows = list(scenarios.sample_requests([scenario], 40))
    sent = [row["response_format"] for row in rows]
    assert {json.dumps(s) for s in sent} == {"null", '{"type": "json_object"}'}


def test_an_empty_schema_list_is_refused(tmp_path):
    (tmp_path / "none.json").write_text("[]")
    found = problems(scenario_path(tmp_path, "{share: 1, schema_file: none.json}"))
    assert "an empty list" in found["structured.schema_file"]
