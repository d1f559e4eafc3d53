"""Structured outputs: a scenario's ``structured:`` section, its schemas (a
file's, or generated: nested objects, enums, arrays) and the constraint each
planned request carries.

A generated schema is drawn from a seeded generator, so every stream and
every load process of a run shares one pool; a request of a ``pool: 0``
scenario gets a schema of its own, titled with a nonce of the load process,
so neither another request nor an earlier run against the same engine can
have left its grammar in the engine's cache.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import yaml

from slogate.scenarios.errors import quoted
from slogate.scenarios.limits import MAX_FILE_BYTES
from slogate.scenarios.model import Constraint, StructuredSpec
from slogate.scenarios.schema import TEXT, Check, Reader, choice, number, optional, required

__all__ = [
    "JSON_OBJECT",
    "STRUCTURED_FIELDS",
    "constraint",
    "generated_schema",
    "read_structured",
    "response_format",
    "schema_key",
    "schema_pool",
]

MAX_POOL = 1000
JSON_OBJECT = "json_object"  # the key of every json_object request: one grammar
UNIQUE_NONCE = os.urandom(4).hex()  # this process's: unique schemas differ across runs
WORDS = (
    "amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo",
    "juniper", "kelp", "lumen", "meadow", "nectar", "onyx", "pepper", "quartz", "river",
    "saffron", "tundra", "umber", "violet", "willow", "xenon", "yarrow", "zephyr",
)  # fmt: skip
ROOT_KINDS = ("enum", "array", "object")  # every generated schema has each
EXTRA_KINDS = ("enum", "integer", "boolean", "array", "object")
LEAF_KINDS = ("enum", "integer", "boolean")
MAX_DEPTH = 2


def _pool(value: Any) -> int:
    if value == "unique":
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_POOL:
        raise ValueError
    return value


POOL = Check(
    f"a number of generated schemas (1 to {MAX_POOL}) or 'unique'",
    _pool,
    {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_POOL}, {"const": "unique"}]},
)
STRUCTURED_FIELDS = {
    "share": required(number(gt=0, le=1)),
    "format": optional(choice("json_schema", JSON_OBJECT), "json_schema"),
    "schema_file": optional(TEXT),
    "pool": optional(POOL),
}


def read_structured(reader: Reader, value: Any, path: str) -> StructuredSpec | None:
    """Structured outputs on a share of requests: json_object, or json_schema
    with the schemas of a file or generated ones (a pool of them, or unique)."""
    f = reader.section(value, path, STRUCTURED_FIELDS)
    if f is None:
        return None
    schemas: tuple[dict[str, Any], ...] = ()
    if f["format"] == JSON_OBJECT:
        for key in ("schema_file", "pool"):
            if f[key] is not None:
                reader.problem(f"{path}.{key}", "format json_object sends no schema; leave it out")
    elif f["schema_file"] is not None:
        if f["pool"] is not None:
            reader.problem(f"{path}.pool", "a pool is drawn from generated schemas, not a file's")
        schemas = _file_schemas(reader, f["schema_file"], f"{path}.schema_file")
        if not schemas:
            return None
    pool = 8 if f["pool"] is None else f["pool"]
    return StructuredSpec(f["share"], f["format"], schemas, pool)


def _file_schemas(reader: Reader, value: str, path: str) -> tuple[dict[str, Any], ...]:
    """The schemas of a JSON or YAML file (one schema, or a list of them),
    each checked as a JSON Schema; a problem names the file and the entry."""
    file = Path(value).expanduser()
    file = (file if file.is_absolute() else reader.base_dir / file).resolve()
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            reader.problem(path, f"{file}: larger than the limit of {MAX_FILE_BYTES} bytes")
            return ()
        loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reader.problem(path, f"cannot read {quoted(value)} ({exc})")
        return ()
    except yaml.YAMLError as exc:
        reader.problem(path, f"{file}: not JSON or YAML: {exc}")
        return ()
    entries = loaded if isinstance(loaded, list) else [loaded]
    if not entries:
        reader.problem(path, f"{file}: an empty list; expected a JSON Schema or a list of them")
        return ()
    from jsonschema import SchemaError, validators  # only scenarios with a schema file pay

    schemas = []
    for index, schema in enumerate(entries):
        where = f"{file}" if len(entries) == 1 else f"{file} entry {index}"
        if not isinstance(schema, dict) or not schema:
            reader.problem(path, f"{where}: expected a JSON Schema object, got {quoted(schema)}")
            continue
        try:
            validators.validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            at = "/".join(map(str, exc.absolute_path)) or "(top)"
            reader.problem(path, f"{where}: not a valid JSON Schema at {at}: {exc.message}")
            continue
        schemas.append(schema)
    return tuple(schemas) if len(schemas) == len(entries) else ()


def generated_schema(rng: Any, depth: int = 0) -> dict[str, Any]:
    """An object schema of enums, integers, booleans, arrays of enums and
    nested objects, every property required and no other allowed: what a
    grammar engine compiles into a real automaton, and small enough that any
    answer fits a few dozen tokens. Strings are enums, numbers bounded: a
    free string or number would let a model that never closes it run out of
    tokens (vLLM with dummy weights)."""
    kinds = list(ROOT_KINDS) if depth == 0 else []
    allowed = EXTRA_KINDS if depth < MAX_DEPTH else LEAF_KINDS
    kinds += [allowed[int(i)] for i in rng.integers(0, len(allowed), int(rng.integers(1, 3)))]
    properties = {}
    for index, kind in enumerate(kinds):
        name = f"{WORDS[int(rng.integers(0, len(WORDS)))]}_{index}"
        properties[name] = _property(kind, rng, depth)
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _property(kind: str, rng: Any, depth: int) -> dict[str, Any]:
    if kind == "object":
        return generated_schema(rng, depth + 1)
    if kind == "integer":
        return {"type": "integer", "minimum": 0, "maximum": 999}
    if kind == "boolean":
        return {"type": "boolean"}
    picks = rng.choice(len(WORDS), 3, replace=False)
    enum = {"type": "string", "enum": [WORDS[int(i)] for i in picks]}
    if kind == "enum":
        return enum
    return {"type": "array", "items": enum, "minItems": 1, "maxItems": 3}


def schema_key(schema: dict[str, Any]) -> str:
    """A schema's identity as a grammar cache sees it: its canonical text."""
    text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(text).hexdigest()[:16]


def schema_pool(spec: StructuredSpec, rng: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The schemas requests draw from, each with its key: the file's, else
    ``spec.pool`` generated from ``rng`` (seeded alike in every process)."""
    if spec.format == JSON_OBJECT or (not spec.schemas and spec.pool == 0):
        return ()
    schemas = spec.schemas or tuple(generated_schema(rng) for _ in range(spec.pool))
    return tuple((schema_key(s), s) for s in schemas)


def response_format(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` body field of a json_schema request (OpenAI's
    shape, which vLLM, SGLang and llama.cpp's server read)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": f"slogate_{key}", "schema": schema, "strict": True},
    }


def constraint(
    spec: StructuredSpec,
    pool: tuple[tuple[str, dict[str, Any]], ...],
    rng: Any,
    unique_id: str,
) -> Constraint:
    """One request's constraint, drawn with the scenario's share: the pool's
    schema it picks, json_object, or a schema of its own (``unique_id``, with
    the process's nonce, titles it: a new grammar to the engine)."""
    if rng.random() >= spec.share:
        return Constraint()
    if spec.format == JSON_OBJECT:
        return Constraint({"type": JSON_OBJECT}, JSON_OBJECT)
    if pool:
        key, schema = pool[int(rng.integers(0, len(pool)))]
        return Constraint(response_format(key, schema), key)
    schema = {"title": f"slogate-{UNIQUE_NONCE}-{unique_id}", **generated_schema(rng)}
    key = schema_key(schema)
    return Constraint(response_format(key, schema), key)
