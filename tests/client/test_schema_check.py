"""The client's check of a structured-output answer (issue 40, item 2): what
broke the schema, named in one line; and which requests saw a schema first."""

from __future__ import annotations

import json

from structured_cases import SCHEMA

from slogate.client.schema_check import SchemaCheck
from slogate.scenarios.model import Constraint
from slogate.scenarios.structured import JSON_OBJECT, response_format


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
