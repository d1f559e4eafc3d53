"""Loading scenario and mix files into validated ``Scenario`` objects.

A scenario file describes one workload with its load and SLOs; a mix file
(``scenarios:`` list) runs several scenario files together under one load,
splitting users and arrivals by weight. Command-line overrides (users, rate,
duration...) are applied to the file's mapping before validation, so an
override gets the same checks and error messages as the file itself.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from slogate.scenarios.arrivals import has_arrivals
from slogate.scenarios.classes import CLASS_FIELDS, read_class, with_class
from slogate.scenarios.errors import Problem, ScenarioError
from slogate.scenarios.limits import MAX_FILE_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from slogate.scenarios.model import LoadSpec, Scenario
from slogate.scenarios.schema import (
    MAPPING,
    NAME,
    REQUIRED,
    TEXT,
    Reader,
    choice,
    integer,
    join,
    list_of,
    nested,
    number,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.sections import (
    AGENT_FIELDS,
    CANCEL_FIELDS,
    ENDPOINTS_SHAPE,
    IMAGE_FIELDS,
    REQUEST_FIELDS,
    SLO_FIELDS,
    SLO_TIERS_SHAPE,
    TIMEOUT_FIELDS,
    load_fields,
    read_agent,
    read_cancel,
    read_endpoints,
    read_images,
    read_load,
    read_request,
    read_slo,
    read_slo_tiers,
    read_timeouts,
)
from slogate.scenarios.structured import STRUCTURED_FIELDS, read_structured
from slogate.scenarios.units import parse_duration
from slogate.scenarios.workloads import (
    WORKLOAD_SHAPE,
    AgentTraceWorkload,
    ConversationsWorkload,
    TraceWorkload,
    read_workload,
)
from slogate.scenarios.workloads.chat import ChatWorkload
from slogate.scenarios.workloads.embed import EmbedWorkload

BUILTIN_DIR = Path(__file__).resolve().parent
BUILTINS = (
    "chat",
    "rag",
    "code",
    "reasoning",
    "agent",
    "coding-agent",
    "embeddings",
    "vision",
    "mixed",
    "azure-conv",
    "azure-code",
)
CHAT_APIS = frozenset({"chat", "responses", "messages"})  # with tool calls and image inputs
OVERRIDES = ("users", "spawn_rate", "rate", "duration", "warmup", "seed")
FLAT_LOAD_OVERRIDES = ("users", "spawn_rate", "rate", "duration")

# A load is read after its workload (a trace's times feed its rate), so the
# table keeps it raw and says what it holds.
LOAD = MAPPING.shaped(section_shape(load_fields(None)))
SCENARIO_FIELDS = {
    "name": optional(NAME),
    "description": optional(TEXT),
    "api": optional(choice("chat", "completions", "responses", "messages", "embeddings"), "chat"),
    "model": optional(TEXT, "auto"),
    "engine_profile": optional(TEXT),
    "seed": optional(integer(ge=0), 0),
    "workload": nested(read_workload, WORKLOAD_SHAPE, REQUIRED),
    "load": optional(LOAD, {}),
    "request": nested(read_request, section_shape(REQUEST_FIELDS), {}),
    "timeouts": nested(read_timeouts, section_shape(TIMEOUT_FIELDS), {}),
    "slo": nested(read_slo, section_shape(SLO_FIELDS), {}),
    "slo_tiers": nested(read_slo_tiers, SLO_TIERS_SHAPE, {}),
    "agent": nested(read_agent, section_shape(AGENT_FIELDS)),
    "images": nested(read_images, section_shape(IMAGE_FIELDS)),
    "cancel": nested(read_cancel, section_shape(CANCEL_FIELDS)),
    "structured": nested(read_structured, section_shape(STRUCTURED_FIELDS)),
    "endpoints": nested(read_endpoints, ENDPOINTS_SHAPE),
}
MEMBER_FIELDS = {
    "file": required(TEXT),
    "model": optional(TEXT),
    "weight": optional(number(ge=0), 1.0),
    "name": optional(NAME),
    "class": nested(read_class, section_shape(CLASS_FIELDS)),
}
MIX_FIELDS = {
    "name": optional(NAME),
    "description": optional(TEXT),
    "seed": optional(integer(ge=0)),
    "load": optional(LOAD, {}),
    "scenarios": required(list_of(section_shape(MEMBER_FIELDS))),
}


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> list[Scenario]:
    """Validated scenarios of a scenario file (one) or a mix file (several,
    weights summing to 1). ``path`` may also name a built-in scenario (``chat``).
    Raises ``ScenarioError`` listing every problem with file and key path."""
    file = resolve(path)
    raw = read_yaml(file)
    loaded = _validated(file, raw, {})
    if not any(value is not None for value in (overrides or {}).values()):
        return loaded
    # One file, one verdict: the file is checked as written first, so a key a
    # flag overrides cannot hide a value `slogate scenario check` refuses.
    raw, notes = apply_overrides(file, raw, overrides or {})
    return _validated(file, raw, notes)


def _validated(file: Path, raw: dict, notes: dict[str, str]) -> list[Scenario]:
    if isinstance(raw, dict) and "scenarios" in raw:
        return _load_mix(file, raw, notes)
    reader = Reader(str(file), file.parent, notes)
    scenario = _scenario(reader, file, raw)
    if scenario is None or reader.problems:
        raise ScenarioError(reader.problems)
    return [scenario]


def resolve(path: str | Path) -> Path:
    """The file ``path`` names: itself if it exists, else a built-in scenario."""
    file = Path(path).expanduser()
    if not file.exists() and str(path) in BUILTINS:
        return BUILTIN_DIR / f"{path}.yaml"
    return file.resolve()


def read_yaml(file: Path) -> dict:
    """The file's top-level mapping. Whatever the file holds, the answer is a
    mapping or a ScenarioError: an empty file, a file that is no scenario (a
    ``.env`` file: its text is never echoed), one past the size, depth or
    node limits (scenarios/limits.py; a YAML alias bomb expands past them)."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise _file_error(file, f"{size} bytes: larger than the limit of {MAX_FILE_BYTES}")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        builtin = ", ".join(BUILTINS)
        raise _file_error(
            file, f"cannot read the file ({exc}); built-in scenarios: {builtin}"
        ) from exc
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _file_error(file, f"not valid YAML: {exc.problem or exc.context}{where}") from exc
    except yaml.YAMLError as exc:
        raise _file_error(file, f"not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise _file_error(file, f"nested deeper than the limit of {MAX_YAML_DEPTH}") from exc
    if not isinstance(raw, dict):
        got = "an empty file" if raw is None else f"a YAML {type(raw).__name__}"
        raise _file_error(file, f"expected a mapping of scenario (or mix) keys, got {got}")
    _check_size(file, raw)
    return raw


def _check_size(file: Path, raw: Any) -> None:
    """Walk the values as the validation would, aliases expanded, stopping at the
    depth and node limits: no later step ever recurses or loops past them."""
    stack = [(raw, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_YAML_NODES:
            raise _file_error(file, f"more than {MAX_YAML_NODES} values (aliases expanded)")
        if depth > MAX_YAML_DEPTH:
            raise _file_error(file, f"nested deeper than the limit of {MAX_YAML_DEPTH}")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that rejects a key written twice in one mapping (PyYAML
    would silently keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _file_error(file: Path, message: str) -> ScenarioError:
    return ScenarioError([Problem(str(file), "", message)])


def apply_overrides(file: Path, raw: Any, overrides: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """The mapping with overrides written in, and notes naming the overridden
    key paths so their problems say where the value came from."""
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(OVERRIDES))
    if unknown:
        raise _file_error(
            file, f"unknown override {', '.join(unknown)}; expected some of {', '.join(OVERRIDES)}"
        )
    if not given or not isinstance(raw, dict):
        return raw, {}
    raw = copy.deepcopy(raw)
    notes = {}
    load = raw.get("load") if isinstance(raw.get("load"), dict) else {}
    flat = [k for k in FLAT_LOAD_OVERRIDES if k in given]
    if load.get("stages") and flat:
        raise ScenarioError(
            [
                Problem(
                    str(file),
                    "load.stages",
                    f"the overrides {', '.join(flat)} set a flat load; this file's load has "
                    "stages, so edit the stages instead",
                )
            ]
        )
    if "users" in given:
        load.pop("rate", None)
    if "rate" in given:
        rate = load.get("rate")
        rate = {k: v for k, v in rate.items() if k != "speedup"} if isinstance(rate, dict) else {}
        load["rate"] = {**rate, "rps": given["rate"]}
        load.pop("users", None)
        load.pop("spawn_rate", None)
        notes["load.rate.rps"] = "from the override rate"
    for key in ("users", "spawn_rate", "duration", "warmup"):
        if key in given:
            load[key] = given[key]
            notes[f"load.{key}"] = f"from the override {key}"
    shorten_warmup(load, given, notes)
    raw["load"] = load
    if "seed" in given:
        raw["seed"] = given["seed"]
        notes["seed"] = "from the override seed"
    return raw, notes


def shorten_warmup(load: dict, given: dict[str, Any], notes: dict[str, str]) -> None:
    """A duration given on the command line that leaves no time after the file's
    own warm-up (``--duration 10s`` on a scenario with ``warmup: 10s``) keeps a
    quarter of the run as warm-up, rather than refusing a short trial run. The
    warm-up used is in the run's recorded configuration; one given explicitly
    is kept and checked as written."""
    if "duration" not in given or "warmup" in given:
        return
    try:
        duration = parse_duration(given["duration"])
        warmup = parse_duration(load.get("warmup", 0))
    except ValueError:
        return  # reported, with its key, when the load section is read
    if 0 < duration <= warmup:
        load["warmup"] = duration / 4
        notes["load.warmup"] = f"shortened to a quarter of the override duration, from {warmup:g}s"


def _scenario(
    reader: Reader, file: Path, raw: Any, load_raw: Any = None, load_reader: Reader | None = None
) -> Scenario | None:
    """One scenario; ``load_raw``/``load_reader`` replace its load with a mix's."""
    before = len(reader.problems)
    f = reader.section(raw, "", SCENARIO_FIELDS, partial=True)
    if f is None:
        return None
    workload = f["workload"]
    _check_turns(reader, f["api"], workload)
    load = None
    workload_raw = raw.get("workload")
    if workload is not None or not (
        isinstance(workload_raw, dict) and workload_raw.get("kind") == "trace"
    ):
        # a broken trace workload would make every trace-arrival setting look wrong too
        trace = workload.trace if isinstance(workload, TraceWorkload) else None
        load_raw = f["load"] if load_raw is None else load_raw
        load = read_load(load_reader or reader, load_raw, "load", trace)
    if load is not None:
        _check_conversations(reader, f["api"], workload, load)
    _check_agent(reader, f["api"], f["agent"], f["request"], load)
    _check_agent_trace(reader, f["api"], workload, f["agent"])
    if f["images"] is not None and f["api"] not in CHAT_APIS:
        wanted = ", ".join(sorted(CHAT_APIS))
        reader.problem("images", f"images are sent with api: one of {wanted}, got api: {f['api']}")
    cancel = f["cancel"]
    if cancel is not None and cancel.after_tokens is not None and f["api"] == "embeddings":
        reader.problem("cancel.after_tokens", "embeddings stream no tokens: use cancel.after_s")
    if f["structured"] is not None and f["api"] != "chat":
        reader.problem("structured", f"response_format is sent with api: chat, got api: {f['api']}")
    if len(reader.problems) > before or load is None:
        return None
    return Scenario(
        name=f["name"] or file.stem,
        api=f["api"],
        model=f["model"],
        workload=workload,
        load=load,
        request=f["request"],
        timeouts=f["timeouts"],
        slo=f["slo"],
        seed=f["seed"],
        engine_profile=f["engine_profile"],
        agent=f["agent"],
        images=f["images"],
        cancel=f["cancel"],
        structured=f["structured"],
        slo_tiers=f["slo_tiers"],
        endpoints=f["endpoints"] or (),
        source=str(file),
        raw={**raw, "load": load_raw},
    )


def _check_agent(reader: Reader, api: str, agent: Any, request: Any, load: LoadSpec | None) -> None:
    """An agent loop answers tool calls, step after step: it needs an API with
    tool calls (chat, responses, messages), tools to call, and closed-loop
    users (an open-loop arrival is one request)."""
    if agent is None:
        return
    if api not in CHAT_APIS:
        wanted = ", ".join(sorted(CHAT_APIS))
        reader.problem("agent", f"an agent loop needs api: one of {wanted}, got api: {api}")
    if request is not None and not request.tools:
        reader.problem("request.tools", "an agent loop needs tools: set request.tools >= 1")
    if load is not None and load.open_loop:
        reader.problem("agent", "an agent loop runs in closed loop: use load.users, not rate")


def _check_agent_trace(reader: Reader, api: str, workload: Any, agent: Any) -> None:
    """A replayed agent tree is played whole: by a closed-loop user, one
    session per user, or started on an open-loop schedule; its calls are
    recorded, so an ``agent:`` loop has nothing to add."""
    if not isinstance(workload, AgentTraceWorkload):
        return
    if api == "embeddings":
        reader.problem("api", "workload kind agent-trace sends prompts; set api: chat")
    if agent is not None:
        reader.problem("agent", "a replayed agent tree has its own calls: remove agent:")


def _check_turns(reader: Reader, api: str, workload: Any) -> None:
    """The API and the workload must fit: conversations need a chat-like API,
    embedding batches the embeddings API and nothing else."""
    if api == "completions" and isinstance(workload, ChatWorkload) and workload.turns.upper > 1:
        reader.problem(
            "workload.turns",
            "multi-turn conversations need api: chat; set turns: 1 for the completions API",
        )
    embed = isinstance(workload, EmbedWorkload)
    if workload is not None and embed != (api == "embeddings"):
        reader.problem(
            "api" if embed else "workload.kind",
            "the embed workload and api: embeddings go together "
            f"(got api: {api}, workload kind: {workload.kind})",
        )


def _check_conversations(reader: Reader, api: str, workload: Any, load: LoadSpec) -> None:
    """Recorded conversations are chat messages; live history waits for replies."""
    if not isinstance(workload, ConversationsWorkload):
        return
    if api != "chat":
        reader.problem("api", "workload kind conversations sends chat messages; set api: chat")
    if workload.history == "live" and has_arrivals(load):
        reader.problem(
            "workload.history",
            "history: live sends the engine's own replies, so it needs closed loop "
            "(load.users); an open-loop arrival is one request: use history: recorded",
        )


def _load_mix(file: Path, raw: dict, notes: dict[str, str]) -> list[Scenario]:
    mix_reader = Reader(str(file), file.parent, notes)
    f = mix_reader.section(raw, "", MIX_FIELDS)
    if f is None:
        raise ScenarioError(mix_reader.problems)
    members = []
    for path, item in mix_reader.items(f["scenarios"], "scenarios", "scenario entries"):
        entry = mix_reader.section(item, path, MEMBER_FIELDS)
        if entry is not None:
            members.append((path, entry))
    member_readers = []
    scenarios = []
    for path, entry in members:
        member_file = _member_file(mix_reader, file, entry["file"], join(path, "file"))
        if member_file is None:
            continue
        member_raw = read_yaml(member_file)
        if isinstance(member_raw, dict) and f["seed"] is not None:
            member_raw = {**member_raw, "seed": f["seed"]}
        reader = Reader(str(member_file), member_file.parent)
        member_readers.append(reader)
        scenario = _scenario(reader, member_file, member_raw, f["load"], mix_reader)
        if scenario is not None:
            scenarios.append((path, entry, scenario))
    _check_members(mix_reader, members, scenarios)
    problems = [p for r in (mix_reader, *member_readers) for p in r.problems]
    if problems:
        raise ScenarioError(list(dict.fromkeys(problems)))
    total = sum(entry["weight"] for _, entry, _ in scenarios)
    named = [
        (
            entry["class"],
            replace(
                s,
                name=entry["name"] or s.name,
                weight=entry["weight"] / total,
                model=entry["model"] or s.model,
            ),
        )
        for _, entry, s in scenarios
    ]
    return [s if c is None else with_class(s, c) for c, s in named]


def _member_file(reader: Reader, mix_file: Path, value: str, path: str) -> Path | None:
    candidate = Path(value).expanduser()
    candidate = candidate if candidate.is_absolute() else mix_file.parent / candidate
    if candidate.is_file():
        return candidate.resolve()
    if value in BUILTINS:
        return BUILTIN_DIR / f"{value}.yaml"
    reader.problem(path, f"file not found: {candidate} (built-in scenarios: {', '.join(BUILTINS)})")
    return None


def _check_members(reader: Reader, members: list, scenarios: list) -> None:
    if members and sum(entry["weight"] for _, entry in members) <= 0:
        reader.problem("scenarios", "expected weights with a sum > 0, got all zero")
    names: dict[str, str] = {}
    for path, entry, scenario in scenarios:
        name = entry["name"] or scenario.name
        if name in names:
            reader.problem(
                join(path, "name"),
                f"scenario name {name!r} is already used by {names[name]}; set name: to tell "
                "them apart",
            )
        names[name] = path
