"""The sections of a scenario file beside the workload: load, request,
timeouts and slo, each a field table plus the checks that span several keys."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from slogate.scenarios.distributions import dist_field
from slogate.scenarios.errors import quoted
from slogate.scenarios.limits import (
    MAX_IN_FLIGHT,
    MAX_RPS,
    MAX_SECONDS,
    MAX_SPAWN_RATE,
    MAX_TOKENS,
    MAX_USERS,
)
from slogate.scenarios.metrics import (
    ACCEPTANCE,
    GOODPUT_LIMITS,
    SCHEMA_VALIDITY,
    SLO_KEYS,
    THROUGHPUT_SLOS,
)
from slogate.scenarios.model import (
    AgentSpec,
    CancelSpec,
    EndpointSpec,
    GoodputSpec,
    ImageSpec,
    LoadSpec,
    RateSpec,
    RequestOptions,
    SloSpec,
    Stage,
    Threshold,
    Timeouts,
)
from slogate.scenarios.prompt_text import load_tokenizer
from slogate.scenarios.schema import (
    AUTO,
    BOOLEAN,
    MAPPING,
    NAME,
    TEXT,
    Check,
    Field,
    Reader,
    Shape,
    choice,
    duration,
    integer,
    join,
    list_of,
    nested,
    number,
    optional,
    or_auto,
    pattern,
    required,
    section_shape,
    warmup,
)
from slogate.scenarios.traces import Trace

ARRIVALS = ("poisson", "gamma", "constant", "trace")
TOKENIZERS = ("local", "server", "estimate")
BODY_KEYS_WE_SET = (
    "model",
    "messages",
    "prompt",
    "input",
    "system",
    "stream",
    "stream_options",
    "max_tokens",
    "max_output_tokens",
    "tools",
)
STATS = ("p50", "p90", "p95", "p99", "p999", "max", "mean")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TIER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def _env_name(value: Any) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise ValueError
    return value


ENV_NAME = Check(
    "an environment variable name", _env_name, {"type": "string", "pattern": pattern(_ENV_NAME)}
)
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")  # an HTTP token (RFC 9110)


def _header_name(value: Any) -> str:
    if not isinstance(value, str) or not _HEADER_NAME.fullmatch(value):
        raise ValueError
    return value.lower()


HEADER_NAME = Check(
    "an HTTP header name (letters, digits, '-')",
    _header_name,
    {"type": "string", "pattern": pattern(_HEADER_NAME)},
)


def _cookie_name(value: Any) -> str:
    if not isinstance(value, str) or not _HEADER_NAME.fullmatch(value):
        raise ValueError
    return value  # a cookie's name keeps its case (RFC 6265)


COOKIE_NAME = Check(
    "a cookie name (letters, digits, '-')",
    _cookie_name,
    {"type": "string", "pattern": pattern(_HEADER_NAME)},
)


def _think_tags(value: Any) -> tuple[str, str] | None:
    if value is False:
        return None
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(tag, str) and tag.strip() for tag in value)
        and value[0] != value[1]
    ):
        return value[0], value[1]
    raise ValueError


THINK_TAGS = Check(
    "false, or [opening tag, closing tag] (two different strings)",
    _think_tags,
    {
        "anyOf": [
            {"const": False},
            {
                "type": "array",
                "items": {"type": "string", "pattern": r"\S"},
                "minItems": 2,
                "maxItems": 2,
                "uniqueItems": True,
            },
        ]
    },
)

# --- load -------------------------------------------------------------------

RPS = number(gt=0, le=MAX_RPS)
RATE_FIELDS = {
    "rps": optional(RPS),
    "arrival": optional(choice(*ARRIVALS), "poisson"),
    "cv": optional(number(gt=0)),
    "speedup": optional(number(gt=0)),
}
RATE_SHAPE: Shape = {"anyOf": [RPS.shape, section_shape(RATE_FIELDS)]}


def read_rate(reader: Reader, value: Any, path: str, trace: Trace | None) -> RateSpec | None:
    """An open-loop rate; a bare number means ``{rps: N}`` with Poisson arrivals.
    ``arrival: trace`` replays the trace's times, at ``speedup`` or at ``rps``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"rps": value}
    f = reader.section(value, path, RATE_FIELDS)
    if f is None:
        return None
    before = len(reader.problems)
    arrival = f["arrival"]
    if f["cv"] is not None and arrival != "gamma":
        reader.problem(join(path, "cv"), f"applies to arrival: gamma only, not {arrival}")
    if arrival != "trace":
        if f["speedup"] is not None:
            reader.problem(join(path, "speedup"), "applies to arrival: trace only")
        if f["rps"] is None:
            reader.problem(
                join(path, "rps"), "missing; expected a number > 0 (requests per second)"
            )
    elif trace is None:
        reader.problem(join(path, "arrival"), "arrival: trace needs a workload of kind: trace")
    elif not trace.has_times:
        reader.problem(
            join(path, "arrival"),
            f"arrival: trace replays recorded times, but {Path(trace.source).name} has no time "
            "column; use arrival: poisson, gamma or constant with rps, or name the time "
            "column in workload.columns.time",
        )
    elif f["rps"] is not None and f["speedup"] is not None:
        reader.problem(path, "give either rps or speedup for arrival: trace, not both")
    if len(reader.problems) > before:
        return None
    rps = f["rps"]
    if arrival == "trace" and trace is not None:  # checked above
        rps = rps or trace.rate_rps * (f["speedup"] or 1.0)
    return RateSpec(rps=rps, arrival=arrival, cv=f["cv"] or 1.0)


def stage_fields(trace: Trace | None) -> dict[str, Field]:
    """One stage's table; its rate replays ``trace``'s times when it has them."""
    return {
        "name": optional(NAME),
        "duration": required(duration(positive=True)),
        "users": optional(integer(ge=1, le=MAX_USERS)),
        "spawn_rate": optional(number(gt=0, le=MAX_SPAWN_RATE)),
        "rate": nested(functools.partial(read_rate, trace=trace), RATE_SHAPE),
    }


def load_fields(trace: Trace | None) -> dict[str, Field]:
    """The load section's table; a rate (its own or a stage's) may replay ``trace``."""
    return {
        "users": optional(integer(ge=1, le=MAX_USERS)),
        "spawn_rate": optional(number(gt=0, le=MAX_SPAWN_RATE)),
        "rate": nested(functools.partial(read_rate, trace=trace), RATE_SHAPE),
        "duration": optional(duration(positive=True)),
        "warmup": optional(warmup(), 0.0),
        "stages": optional(list_of(section_shape(stage_fields(None)))),
        "max_in_flight": optional(integer(ge=1, le=MAX_IN_FLIGHT), 1024),
        "max_lag_ms": optional(number(gt=0), 50.0),
    }


def read_load(reader: Reader, value: Any, path: str, trace: Trace | None) -> LoadSpec | None:
    f = reader.section(value, path, load_fields(trace))
    if f is None:
        return None
    before = len(reader.problems)
    if f["users"] is not None and f["rate"] is not None:
        reader.problem(path, "give either users (closed loop) or rate (open loop), not both")
    if f["spawn_rate"] is not None and f["users"] is None:
        reader.problem(join(path, "spawn_rate"), "applies to closed loop only (load.users)")
    if f["users"] is None and f["rate"] is None and not f["stages"]:
        f["users"] = 1
    if f["users"] is not None and f["spawn_rate"] is None:
        f["spawn_rate"] = float(f["users"])
    stages = _read_stages(reader, f, join(path, "stages"), trace) if f["stages"] else ()
    duration_s = f["duration"] if f["duration"] is not None else 60.0
    if stages:
        total = sum(s.duration_s for s in stages)
        if f["duration"] is not None and abs(f["duration"] - total) > 1e-9:
            reader.problem(
                join(path, "duration"),
                f"expected no duration or the stages' total ({total:g}s), got {f['duration']:g}s",
            )
        duration_s = total
    auto = f["warmup"] == AUTO
    if not auto and f["warmup"] >= duration_s:
        reader.problem(
            join(path, "warmup"),
            f"expected a warm-up shorter than the duration ({duration_s:g}s), got {f['warmup']:g}s",
        )
    if len(reader.problems) > before:
        return None
    return LoadSpec(
        users=f["users"],
        spawn_rate=f["spawn_rate"],
        rate=f["rate"],
        duration_s=duration_s,
        warmup_s=0.0 if auto else f["warmup"],
        warmup_auto=auto,
        stages=stages,
        max_in_flight=f["max_in_flight"],
        max_lag_ms=f["max_lag_ms"],
    )


def _read_stages(
    reader: Reader, load: dict[str, Any], path: str, trace: Trace | None
) -> tuple[Stage, ...]:
    """Stages in order; a stage without users or rate keeps the load's own."""
    stages = []
    fields = stage_fields(trace)
    for i, (item_path, item) in enumerate(reader.items(load["stages"], path, "stages")):
        f = reader.section(item, item_path, fields)
        if f is None:
            continue
        if f["users"] is not None and f["rate"] is not None:
            reader.problem(item_path, "give either users or rate, not both")
            continue
        if f["users"] is None and f["rate"] is None:
            f["users"], f["rate"] = load["users"], load["rate"]
            if f["spawn_rate"] is None:
                f["spawn_rate"] = load["spawn_rate"]
        if f["users"] is None and f["rate"] is None:
            reader.problem(item_path, "expected users or rate here or in load")
            continue
        if f["users"] is not None and f["spawn_rate"] is None:
            f["spawn_rate"] = float(f["users"])
        stages.append(
            Stage(
                name=f["name"] or f"stage{i + 1}",
                duration_s=f["duration"],
                users=f["users"],
                spawn_rate=f["spawn_rate"],
                rate=f["rate"],
            )
        )
    names = [s.name for s in stages]
    for name in sorted({n for n in names if names.count(n) > 1}):
        reader.problem(path, f"stage names must be unique; {name!r} is used twice or more")
    return tuple(stages)


# --- request and timeouts ----------------------------------------------------

REQUEST_FIELDS = {
    "include_usage": optional(BOOLEAN, True),
    "continuous_usage": optional(or_auto(BOOLEAN), AUTO),
    "ignore_eos": optional(BOOLEAN, False),
    "min_tokens": optional(BOOLEAN, False),
    "temperature": optional(number(ge=0, le=2)),
    "extra_body": optional(
        MAPPING.shaped(
            {"type": "object", "propertyNames": {"not": {"enum": list(BODY_KEYS_WE_SET)}}}
        ),
        {},
    ),
    "api_key_env": optional(ENV_NAME, "OPENAI_API_KEY"),
    "tokenizer": optional(TEXT, "local"),
    "think_tags": optional(THINK_TAGS, ("<think>", "</think>")),
    "think_starts_inside": optional(BOOLEAN, False),
    "tools": optional(integer(ge=0, le=128), 0),
    "served_by_header": optional(HEADER_NAME),
    "session_header": optional(HEADER_NAME),
    "session_id_header": optional(HEADER_NAME),
    "session_cookie": optional(COOKIE_NAME),
}


def read_request(reader: Reader, value: Any, path: str) -> RequestOptions | None:
    f = reader.section(value, path, REQUEST_FIELDS)
    if f is None:
        return None
    clashes = sorted(set(f["extra_body"]) & set(BODY_KEYS_WE_SET))
    if clashes:
        reader.problem(
            join(path, "extra_body"),
            f"expected fields the load side does not set itself; remove {', '.join(clashes)}",
        )
        return None
    if f["session_header"] is not None and f["session_cookie"] is not None:
        reader.problem(
            join(path, "session_cookie"),
            "a router's session comes in a header or a cookie: set session_header or"
            " session_cookie, not both",
        )
        return None
    f["tools"] = tool_definitions(f["tools"])
    if f["tokenizer"] not in TOKENIZERS:
        f["tokenizer"] = tokenizer_path(reader, f["tokenizer"], join(path, "tokenizer"))
        if f["tokenizer"] is None:
            return None
    return RequestOptions(**f)


TOOL_SUBJECTS = ("weather", "stock_price", "search_docs", "calendar", "translate", "convert_units")


def tool_definitions(count: int) -> tuple[dict[str, Any], ...]:
    """``count`` function tools, each with a one-string-argument JSON schema:
    what an agent framework sends with every request (their tokens count)."""
    return tuple(
        {
            "name": f"{TOOL_SUBJECTS[i % len(TOOL_SUBJECTS)]}_{i}",
            "description": f"Look up {TOOL_SUBJECTS[i % len(TOOL_SUBJECTS)].replace('_', ' ')}"
            " for the user's request and return the result as text.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to look up"}},
                "required": ["query"],
            },
        }
        for i in range(count)
    )


def tokenizer_path(reader: Reader, value: str, path: str) -> str | None:
    """A tokenizer given as a file (relative to the scenario): it must load."""
    file = Path(value).expanduser()
    file = (file if file.is_absolute() else reader.base_dir / file).resolve()
    expected = f"expected {', '.join(TOKENIZERS)} or the path of a tokenizer.json"
    if not file.is_file():
        reader.problem(path, f"{expected}, got {quoted(value)} (no such file: {file})")
        return None
    try:
        load_tokenizer(str(file))
    except Exception as error:  # the tokenizers library raises plain Exception
        reader.problem(path, f"{expected}; {file} does not load as one: {error}")
        return None
    return str(file)


TIMEOUT_FIELDS = {
    "connect": optional(duration(positive=True), 10.0),
    "first_token": optional(duration(positive=True), 120.0),
    "stall": optional(duration(positive=True), 60.0),
}


def read_timeouts(reader: Reader, value: Any, path: str) -> Timeouts | None:
    f = reader.section(value, path, TIMEOUT_FIELDS)
    if f is None:
        return None
    return Timeouts(connect_s=f["connect"], first_token_s=f["first_token"], stall_s=f["stall"])


# --- agent ------------------------------------------------------------------

AGENT_FIELDS = {
    "max_steps": optional(integer(ge=1, le=100), 8),
    "tool_latency_s": dist_field(0, MAX_SECONDS, {"dist": "lognormal", "median": 0.3, "p90": 1.2}),
}


IMAGE_FIELDS = {
    "count": optional(integer(ge=1, le=64), 1),
    "width": optional(integer(ge=16, le=8192), 1024),
    "height": optional(integer(ge=16, le=8192), 768),
    "format": optional(choice("jpeg", "png", "webp"), "jpeg"),
}


def read_images(reader: Reader, value: Any, path: str) -> ImageSpec | None:
    f = reader.section(value, path, IMAGE_FIELDS)
    return None if f is None else ImageSpec(f["count"], f["width"], f["height"], f["format"])


def read_agent(reader: Reader, value: Any, path: str) -> AgentSpec | None:
    f = reader.section(value, path, AGENT_FIELDS)
    return None if f is None else AgentSpec(f["max_steps"], f["tool_latency_s"])


# --- cancel -----------------------------------------------------------------

CANCEL_FIELDS = {
    "share": required(number(gt=0, le=1)),
    "after_s": dist_field(0, MAX_SECONDS),
    "after_tokens": dist_field(1, MAX_TOKENS),
}


def read_cancel(reader: Reader, value: Any, path: str) -> CancelSpec | None:
    """Which requests the client cancels and when: a share of them, after a
    delay from the send or after some output tokens (one of the two)."""
    f = reader.section(value, path, CANCEL_FIELDS)
    if f is None:
        return None
    given = [key for key in ("after_s", "after_tokens") if value.get(key) is not None]
    if len(given) != 1:
        got = f"got {' and '.join(given)}" if given else "got neither"
        reader.problem(path, f"expected exactly one of after_s, after_tokens; {got}")
        return None
    if f[given[0]] is None:  # its own problem is already reported
        return None
    return CancelSpec(f["share"], f["after_s"], f["after_tokens"])


# --- slo --------------------------------------------------------------------

LATENCY_FIELDS = {stat: optional(number(gt=0)) for stat in STATS}
MINIMUM_FIELDS = {"min": required(number(gt=0))}
FRACTION_FIELDS = {"min": required(number(gt=0, le=1))}
GOODPUT_FIELDS = {
    "min": optional(number(ge=0, le=1)),
    **{key: optional(number(gt=0)) for key in GOODPUT_LIMITS},
}
GOODPUT_SHAPE: Shape = {
    **section_shape(GOODPUT_FIELDS),
    "anyOf": [
        {"required": [key], "properties": {key: {"type": "number"}}} for key in GOODPUT_LIMITS
    ],
}


def _latency(reader: Reader, value: Any, path: str) -> dict[str, float] | None:
    f = reader.section(value, path, LATENCY_FIELDS)
    return None if f is None else {k: v for k, v in f.items() if v is not None}


def _minimum(reader: Reader, value: Any, path: str) -> float | None:
    f = reader.section(value, path, MINIMUM_FIELDS)
    return None if f is None else f["min"]


def _goodput(reader: Reader, value: Any, path: str) -> GoodputSpec | None:
    f = reader.section(value, path, GOODPUT_FIELDS)
    if f is None:
        return None
    if all(f[key] is None for key in GOODPUT_LIMITS):
        reader.problem(
            path, f"expected at least one per-request limit: {', '.join(GOODPUT_LIMITS)}"
        )
        return None
    return GoodputSpec(min_fraction=f["min"], **{key: f[key] for key in GOODPUT_LIMITS})


ERROR_RATE_FIELDS = {"max": required(number(ge=0, le=1))}
ACCEPTANCE_FIELDS = FRACTION_FIELDS
THROUGHPUT_FIELDS = {
    metric: nested(_minimum, section_shape(MINIMUM_FIELDS)) for metric in THROUGHPUT_SLOS
}
SLO_FIELDS = {
    **{metric: nested(_latency, section_shape(LATENCY_FIELDS)) for metric in SLO_KEYS},
    "error_rate": nested(
        lambda r, v, p: r.section(v, p, ERROR_RATE_FIELDS), section_shape(ERROR_RATE_FIELDS)
    ),
    "throughput": nested(
        lambda r, v, p: r.section(v, p, THROUGHPUT_FIELDS), section_shape(THROUGHPUT_FIELDS)
    ),
    "goodput": nested(_goodput, GOODPUT_SHAPE),
    ACCEPTANCE: nested(
        lambda r, v, p: r.section(v, p, ACCEPTANCE_FIELDS), section_shape(ACCEPTANCE_FIELDS)
    ),
    SCHEMA_VALIDITY: nested(
        lambda r, v, p: r.section(v, p, FRACTION_FIELDS), section_shape(FRACTION_FIELDS)
    ),
}
SLO_TIERS_SHAPE: Shape = {
    "type": "object",
    "propertyNames": {"pattern": pattern(_TIER_NAME)},
    "additionalProperties": section_shape(SLO_FIELDS),
}


def read_slo(reader: Reader, value: Any, path: str) -> SloSpec | None:
    """SLOs as thresholds: latency stats must stay at or below their limits, the
    error rate at or below its maximum, throughput and goodput at or above theirs."""
    f = reader.section(value, path, SLO_FIELDS)
    if f is None:
        return None
    thresholds = [
        Threshold(metric, stat, limit)
        for metric in SLO_KEYS
        for stat, limit in (f[metric] or {}).items()
    ]
    if f["error_rate"]:
        thresholds.append(Threshold("error_rate", "rate", f["error_rate"]["max"]))
    if f[ACCEPTANCE]:
        thresholds.append(Threshold(ACCEPTANCE, "rate", f[ACCEPTANCE]["min"], "min"))
    for metric, limit in (f["throughput"] or {}).items():
        if limit is not None:
            thresholds.append(Threshold(metric, "rate", limit, "min"))
    goodput = f["goodput"]
    if goodput is not None and goodput.min_fraction is not None:
        thresholds.append(Threshold("goodput", "fraction", goodput.min_fraction, "min"))
    if f[SCHEMA_VALIDITY]:
        limit = f[SCHEMA_VALIDITY]["min"]
        thresholds.append(Threshold(SCHEMA_VALIDITY, "fraction", limit, "min"))
    return SloSpec(thresholds=tuple(thresholds), goodput=goodput)


def read_slo_tiers(reader: Reader, value: Any, path: str) -> tuple[tuple[str, SloSpec], ...] | None:
    """Named sets of SLOs (``interactive: {...}``, ``batch: {...}``), each an
    ``slo`` section: a sweep reports the most load under each."""
    if not isinstance(value, dict):
        reader.problem(path, f"expected a mapping of tier names to SLOs, got {quoted(value)}")
        return None
    tiers = []
    for name, slo in value.items():
        if not isinstance(name, str) or _TIER_NAME.fullmatch(name) is None:
            reader.problem(
                path, f"expected tier names of letters, digits, '_' or '-', got {quoted(name)}"
            )
            continue
        spec = read_slo(reader, slo, join(path, name))
        if spec is not None:
            tiers.append((name, spec))
    return tuple(tiers)


_BASE_URL = re.compile(r"https?://[^\s/?#]+(/\S*)?")


def _checked_url(value: Any) -> str:
    if not isinstance(value, str) or not _BASE_URL.fullmatch(value):
        raise ValueError
    return value


ENDPOINT_FIELDS = {
    "name": required(NAME),
    "url": required(Check("an http(s) base URL", _checked_url, {"type": "string"})),
    "weight": optional(number(gt=0), 1.0),
}
ENDPOINTS_SHAPE = list_of(section_shape(ENDPOINT_FIELDS)).shape


def read_endpoints(reader: Reader, value: Any, path: str) -> tuple[EndpointSpec, ...] | None:
    """``endpoints:``: a list of ``{name, url, weight}``, names unique."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        reader.problem(path, "expected a non-empty list of {name, url, weight}")
        return None
    endpoints: list[EndpointSpec] = []
    for index, item in enumerate(value):
        f = reader.section(item, join(path, index), ENDPOINT_FIELDS)
        if f is None:
            return None
        if any(e.name == f["name"] for e in endpoints):
            reader.problem(join(join(path, index), "name"), f"{f['name']!r} is named twice")
            return None
        endpoints.append(EndpointSpec(**f))
    return tuple(endpoints)
