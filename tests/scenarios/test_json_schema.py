"""`slogate schema scenario`: the JSON Schema generated from the loader's own
tables accepts every file the loader accepts and refuses the bad ones wherever
JSON Schema can say why; the rules only the loader can check are listed here
(and in docs/scenarios.md) and are shown to be the schema's blind spots."""

from __future__ import annotations

import importlib
import json
import pkgutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from loadruns import ROOT, cli, scenario_file
from scenario_cases import BAD_VALUES, BAD_WORKLOADS, HOSTILE, LIMITS, MINIMAL

import slogate.scenarios
from slogate import scenarios
from slogate.scenarios import ScenarioError
from slogate.scenarios.distributions import kind_tables
from slogate.scenarios.json_schema import scenario_schema
from slogate.scenarios.loader import read_yaml
from slogate.scenarios.schema import REQUIRED, Field, choice, join, required
from slogate.scenarios.sections import load_fields, stage_fields

SCHEMA = scenario_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

# Loader rules JSON Schema cannot express, by the bad case that shows each.
ACROSS_KEYS = "a check across keys"
LOADER_ONLY = {
    "load: {duration: 10s, warmup: 20s}\n": ACROSS_KEYS + ": warm-up shorter than the duration",
    "load: {users: 2, rate: 5}\n": ACROSS_KEYS + ": users (closed loop) or rate, not both",
    "load: {rate: {arrival: poisson}}\n": ACROSS_KEYS + ": rps needed unless arrival: trace",
    "load: {rate: {rps: 2, cv: 3}}\n": ACROSS_KEYS + ": cv for arrival: gamma only",
    "request: {session_header: x-t, session_cookie: llm-d-session}\n": ACROSS_KEYS
    + ": a session header or a session cookie, not both",
    "load: {rate: {rps: 2, arrival: trace}}\n": "across sections: arrival: trace needs a trace",
    "request: {tokenizer: nowhere.json}\n": "a file that must exist and load as a tokenizer",
    "timeouts: {connect: 0s}\n": "a duration's bounds (> 0, up to 7 days) when written as text",
    "input_tokens: {dist: lognormal, median: 1020, p90: 500}": ACROSS_KEYS + ": p90 > median",
    "input_tokens: {dist: uniform, min: 50, max: 10}": ACROSS_KEYS + ": min <= max",
    "output_tokens: {dist: empirical, file: missing.csv, column: x}": "a data file that exists",
    "output_tokens: {dist: empirical, file: azure-conv, column: Tokens}": "a column of the file",
}
# YAML's own limits are checked before any key is read; as parsed they are
# mappings of unknown keys, which the schema refuses for that reason only.
YAML_LIMITS = {"deep": "nesting depth", "alias-bomb": "values with aliases expanded"}

GOOD = [
    MINIMAL,
    MINIMAL
    + "load: {rate: 2.5, duration: 1m30s, warmup: '10'}\nslo:\nrequest: {think_tags: false}\n",
    MINIMAL
    + "load:\n  users: 4\n  stages: [{name: low, duration: 30s}, {duration: 1m, rate: 5}]\n",
    MINIMAL + "slo_tiers: {interactive: {ttft_ms: {p99: 500}}, batch: {goodput: {e2e_ms: 9000}}}\n",
    MINIMAL + "request: {extra_body: {top_p: 0.9}, served_by_header: X-Served-By}\n",
    MINIMAL + "request: {session_cookie: llm-d-session, session_id_header: X-SMG-Routing-Key}\n",
    MINIMAL + "load: {users: 2, duration: 2m, warmup: auto}\n",
    "scenarios: [{file: chat, weight: 3}, {file: code, name: c}]\nload: {rate: {rps: 10}}\n",
]


def errors(raw: Any) -> list[jsonschema.ValidationError]:
    return list(VALIDATOR.iter_errors(raw))


def key_paths(found: list[jsonschema.ValidationError]) -> set[str]:
    """Where each error (and each alternative of an anyOf) points, written as
    the loader writes key paths."""
    paths = set()
    for error in found:
        path = ""
        for part in error.absolute_path:
            path = join(path, part)
        paths.add(path)
        paths |= key_paths(list(error.context or ()))
    return paths


def assert_refused_at(raw: Any, loader_path: str) -> None:
    found = errors(raw)
    assert found, f"the schema accepts what the loader refuses at {loader_path}"
    pointed = key_paths(found)
    assert any(loader_path.startswith(path) for path in pointed), (loader_path, pointed)


def accepted_files() -> list[Path]:
    files = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted(
        (ROOT / "tests" / "data").rglob("*.yaml")
    )
    return [file for file in files if loads(file)]


def loads(file: Path) -> bool:
    try:
        scenarios.load(file)
    except ScenarioError:
        return False
    return True


def test_the_command_prints_a_valid_draft_2020_12_schema() -> None:
    done = cli("schema", "scenario")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed == SCHEMA and printed["$schema"].endswith("/draft/2020-12/schema")


ACCEPTED = accepted_files()  # loaded once: collection needs them too


@pytest.mark.parametrize("file", ACCEPTED, ids=lambda f: f.name)
def test_every_file_the_loader_accepts_validates(file: Path) -> None:
    assert not errors(read_yaml(file)), [e.message for e in errors(read_yaml(file))]


def test_the_scenarios_folder_and_test_data_are_all_checked() -> None:
    names = {file.name for file in ACCEPTED}
    assert {"chat.yaml", "mixed.yaml", "coding-agent.yaml", "exact-chat.yaml"} <= names


@pytest.mark.parametrize("text", GOOD)
def test_shorthands_and_empty_keys_the_loader_takes_validate(tmp_path: Path, text: str) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(textwrap.dedent(text))
    assert loads(file)
    assert not errors(read_yaml(file)), [e.message for e in errors(read_yaml(file))]


@pytest.mark.parametrize(("text", "path", "expected"), BAD_VALUES)
def test_bad_values_are_refused_where_the_loader_refuses_them(
    text: str, path: str, expected: str
) -> None:
    raw = yaml.safe_load(MINIMAL + text)
    if text in LOADER_ONLY:
        assert not errors(raw), "listed as the loader's alone, yet the schema refuses it"
    else:
        assert_refused_at(raw, path)


@pytest.mark.parametrize(("workload", "path", "expected"), BAD_WORKLOADS)
def test_bad_workloads_are_refused_where_the_loader_refuses_them(
    workload: str, path: str, expected: str
) -> None:
    raw = yaml.safe_load(f"workload:\n  kind: chat\n  {workload}\n")
    if workload in LOADER_ONLY:
        assert not errors(raw), "listed as the loader's alone, yet the schema refuses it"
    else:
        assert_refused_at(raw, path.removesuffix(".value"))


@pytest.mark.parametrize(("changes", "path", "says"), LIMITS.values(), ids=LIMITS.keys())
def test_limits_are_in_the_schema(tmp_path: Path, changes: dict, path: str, says: str) -> None:
    raw = yaml.safe_load(scenario_file(tmp_path, "exact-chat", **changes).read_text())
    assert_refused_at(raw, path.removesuffix(".value"))


@pytest.mark.parametrize(("text", "says"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_files_are_refused(text: str, says: str) -> None:
    try:
        raw = yaml.safe_load(text)
    except RecursionError:
        raw = {"a": []}  # PyYAML cannot build it; as far as it got, it is an unknown key
    assert errors(raw)


def test_the_yaml_limits_cases_are_hostile_cases() -> None:
    assert set(YAML_LIMITS) <= set(HOSTILE)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("scenarios: [{file: a.yaml, wieght: 2}]\n", "scenarios[0].wieght"),
        ("scenarios: []\n", "scenarios"),
        ("scenarios: [{file: a.yaml}]\nload: {users: 0}\n", "load.users"),
        ("scenarios: [{file: a.yaml}]\nworkload: {kind: chat}\n", "workload"),
        ("workload: {kind: poem}\n", "workload.kind"),
        ("workload: {kind: rag, turns: 2}\n", "workload.turns"),
        ("slo: {goodput: {min: 0.9}}\nworkload: {kind: chat}\n", "slo.goodput"),
        ("slo_tiers: {'bad tier': {}}\nworkload: {kind: chat}\n", "slo_tiers"),
    ],
)
def test_mixes_kinds_and_tiers_are_refused(tmp_path: Path, text: str, path: str) -> None:
    (tmp_path / "a.yaml").write_text(MINIMAL)
    file = tmp_path / "s.yaml"
    file.write_text(text)
    assert not loads(file)
    assert_refused_at(read_yaml(file), path)


def tables() -> Iterator[tuple[str, dict[str, Field]]]:
    """Every field table the loader reads with: the scenario modules' own, and
    those made by a function (the load's and a stage's, a distribution's)."""
    for info in pkgutil.walk_packages(slogate.scenarios.__path__, "slogate.scenarios."):
        for name, value in vars(importlib.import_module(info.name)).items():
            if (
                isinstance(value, dict)
                and value
                and all(isinstance(v, Field) for v in value.values())
            ):
                yield f"{info.name}.{name}", value
    yield "load_fields", load_fields(None)
    yield "stage_fields", stage_fields(None)
    for kind, fields in kind_tables(1, 2).items():
        yield f"dist: {kind}", {"dist": required(choice(kind)), **fields}


def objects(shape: Any) -> Iterator[dict[str, Any]]:
    if isinstance(shape, dict):
        if shape.get("additionalProperties") is False:
            yield shape
        for value in shape.values():
            yield from objects(value)
    elif isinstance(shape, list):
        for value in shape:
            yield from objects(value)


def test_every_table_is_in_the_schema_key_for_key() -> None:
    """A key added to any table, or made required, shows in the schema."""
    described = {
        (frozenset(o["properties"]), frozenset(o.get("required", ()))) for o in objects(SCHEMA)
    }
    names = []
    for name, fields in tables():
        needed = frozenset(key for key, field in fields.items() if field.default is REQUIRED)
        assert (frozenset(fields), needed) in described, f"{name} is not in the schema"
        names.append(name)
    assert len(names) >= 30 and "slogate.scenarios.sections.REQUEST_FIELDS" in names
