"""Controlled experiments: change one factor, hold the rest, repeat.

- ``prompt-length``: fixed input lengths -> TTFT (prefill grows with the prompt);
- ``output-length``: fixed output lengths (``ignore_eos``) -> TPOT (stable);
- ``concurrency``: closed-loop users -> throughput against per-request latency;
- ``precision``: weight data types on the simulated engine (one engine per
  type), or endpoints the user names by their type -> memory and speed;
- ``speculative``: closed-loop users on an engine with speculative decoding
  and the same engine without -> the load where speculation stops paying
  (:mod:`slogate.studies.speculation`).

This module designs the trials (each setting's scenario, engine and load, the
repeats interleaved so a drift in the engine spreads over every setting instead
of biasing one) and builds experiment.json from their results: the points
pooled per setting and the trends read along them
(:mod:`slogate.studies.points`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from slogate import scenarios
from slogate.analysis.documents.contracts import Experiment, parse
from slogate.analysis.documents.versions import EXPERIMENT_SCHEMA
from slogate.analysis.measurement.costs import Pricing
from slogate.scenarios.loader import read_yaml, resolve
from slogate.simengine.profiles import DEFAULT_PROFILE, WEIGHT_BYTES, load_profile
from slogate.studies.points import EXPECTATIONS, trend
from slogate.studies.speculation import (
    ARMS,
    OFF,
    ON,
    arm_label,
    crossover,
    crossover_trend,
    speedups,
)
from slogate.studies.trials import TrialResult, point_of, write_scenario

FACTORS = ("prompt-length", "output-length", "concurrency", "precision", "speculative")
DEFAULT_VALUES = {
    "prompt-length": "128,512,2048,8192",
    "output-length": "32,128,512,1024",
    "concurrency": "1,2,4,8,16,32",
    "precision": "bf16,fp8,int4",
    "speculative": "1,4,16,64",
}
X_LABELS = {
    "prompt-length": "prompt tokens",
    "output-length": "output tokens",
    "concurrency": "concurrent users",
    "precision": "bytes per weight",
    "speculative": "concurrent users",
}
TITLES = {
    "prompt-length": "prompt length",
    "output-length": "output length",
    "concurrency": "concurrency",
    "precision": "weight precision",
    "speculative": "speculative decoding",
}
# draft tokens per step when the profile of a speculative experiment names none
DEFAULT_DRAFT_TOKENS = 3


@dataclass(frozen=True)
class ExperimentSettings:
    """What an experiment was asked to do. ``values`` is the comma-separated
    settings (None: the factor's defaults); ``endpoints`` are ``DTYPE=URL`` for a
    precision experiment across real engines; ``command`` is the command line as
    the document records it."""

    factor: str
    duration: float
    repeats: int = 1
    values: str | None = None
    scenario: str | None = None
    users: int | None = None
    input_tokens: int = 512
    output_tokens: int = 64
    endpoints: tuple[str, ...] = ()
    host: str | None = None
    profile: str | None = None
    speedup: float = 1.0
    seed: int | None = None
    command: str = ""


@dataclass(frozen=True)
class Setting:
    """One value of the factor: its label, x (for plots and trends), the trial's
    scenario changes and load, and the engine it runs on."""

    label: str
    x: float
    workload: dict[str, Any]
    users: int | None  # None: as the scenario says
    host: str | None
    profile: str | None
    weight_bytes: int | None = None


def base_scenario(settings: ExperimentSettings) -> dict[str, Any]:
    """The scenario the factor's settings are applied to: the user's, or a
    single-turn chat whose lengths are fixed and whose output ends at max_tokens."""
    if settings.scenario:
        path = resolve(settings.scenario)
        raw = read_yaml(path)
        if not isinstance(raw, dict) or "workload" not in raw:
            raise ValueError(f"{path}: an experiment needs a single scenario with a workload")
        return raw
    return {
        "name": settings.factor,
        "api": "chat",
        "model": "auto",
        "workload": {
            "kind": "chat",
            "input_tokens": settings.input_tokens,
            "output_tokens": settings.output_tokens,
            "turns": 1,
            "think_time_s": 0,
        },
        "load": {"users": 1, "duration": "20s"},
        "request": {"ignore_eos": True},
    }


def integers(text: str, what: str) -> list[int]:
    """``--values`` as positive whole numbers."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--values {text!r}: expected comma-separated {what}") from None
    if not values or min(values) < 1:
        raise ValueError(f"--values {text!r}: expected {what} of at least 1")
    return values


def factor_settings(settings: ExperimentSettings) -> list[Setting]:
    """The factor's settings from --values (or --endpoint for real precision runs)."""
    if settings.factor == "precision":
        items = precision_settings(settings)
    elif settings.factor == "speculative":
        items = speculative_settings(settings)
    else:
        items = sized(settings)
    labels = [s.label for s in items]
    if len(set(labels)) != len(labels):
        raise ValueError(f"each setting once, please: {', '.join(labels)}")
    return items


def sized(settings: ExperimentSettings) -> list[Setting]:
    """Settings of the factors given as numbers (lengths, users)."""
    factor = settings.factor
    text = settings.values or DEFAULT_VALUES[factor]
    what = "user counts" if factor == "concurrency" else "token counts"
    out = []
    for value in integers(text, what):
        workload = {
            "prompt-length": {"input_tokens": value},
            "output-length": {"output_tokens": value},
            "concurrency": {},
        }[factor]
        n = value if factor == "concurrency" else settings.users
        out.append(Setting(str(value), float(value), workload, n, settings.host, settings.profile))
    return out


def precision_settings(settings: ExperimentSettings) -> list[Setting]:
    """One setting per weight dtype: a simulated engine each, or the user's endpoints."""
    users = settings.users
    if settings.endpoints:
        if settings.values or settings.host:
            raise ValueError("with --endpoint, the endpoints are the values: drop --values/--host")
        out = []
        for item in settings.endpoints:
            dtype, sep, url = item.partition("=")
            if not sep or dtype.lower() not in WEIGHT_BYTES:
                raise ValueError(
                    f"--endpoint {item!r}: expected DTYPE=URL with DTYPE one of "
                    f"{', '.join(WEIGHT_BYTES)}"
                )
            out.append(Setting(dtype, WEIGHT_BYTES[dtype.lower()], {}, users, url, None))
        return out
    if settings.host:
        raise ValueError(
            "a precision experiment needs one engine per precision: name them with "
            "--endpoint DTYPE=URL, or drop --host to use the simulated engine"
        )
    out = []
    for dtype in (settings.values or DEFAULT_VALUES["precision"]).split(","):
        profile = load_profile(settings.profile or DEFAULT_PROFILE, weight_dtype=dtype.strip())
        x = WEIGHT_BYTES[profile.weight_dtype]
        out.append(
            Setting(profile.weight_dtype, x, {}, users, None, profile.name, profile.weight_bytes)
        )
    return out


def speculative_settings(settings: ExperimentSettings) -> list[Setting]:
    """Each load twice, without and with speculation: the simulated engine
    of ``--profile`` with ``speculative_tokens=0`` and with its own (3 when
    it names none), or the user's endpoints named ``off`` and ``on``."""
    users = integers(settings.values or DEFAULT_VALUES["speculative"], "user counts")
    engines = dict(speculative_engines(settings))
    return [
        Setting(arm_label(arm, n), float(n), {}, n, *engines[arm]) for arm in ARMS for n in users
    ]


def speculative_engines(
    settings: ExperimentSettings,
) -> list[tuple[str, tuple[str | None, str | None]]]:
    """(arm, (host, profile)) of each arm."""
    if settings.endpoints:
        if settings.host:
            raise ValueError("with --endpoint, the endpoints are the engines: drop --host")
        named = dict(item.partition("=")[::2] for item in settings.endpoints)
        if sorted(named) != sorted(ARMS) or not all(named.values()):
            raise ValueError(
                f"--endpoint {' '.join(settings.endpoints)}: expected off=URL (no speculation) "
                "and on=URL (speculation), once each"
            )
        return [(arm, (named[arm], None)) for arm in ARMS]
    if settings.host:
        raise ValueError(
            "a speculative experiment needs an engine with speculation and one without: "
            "name them with --endpoint off=URL --endpoint on=URL, or drop --host to use "
            "the simulated engine"
        )
    base = settings.profile or DEFAULT_PROFILE
    drafts = load_profile(base).speculative_tokens or DEFAULT_DRAFT_TOKENS
    return [
        (OFF, (None, f"{base}:speculative_tokens=0")),
        (ON, (None, f"{base}:speculative_tokens={drafts}")),
    ]


def trial_scenario(base: dict[str, Any], setting: Setting) -> dict[str, Any]:
    """``base`` with the setting applied; a fixed output length needs ignore_eos."""
    raw = copy.deepcopy(base)
    raw["workload"].update(setting.workload)
    if "output_tokens" in setting.workload:
        raw.setdefault("request", {})["ignore_eos"] = True
    return raw


def engine_groups(items: list[Setting]) -> list[list[Setting]]:
    """Settings that share an engine, in order: one group unless each setting
    names its own engine (precision)."""
    groups: dict[tuple[str | None, str | None], list[Setting]] = {}
    for s in items:
        groups.setdefault((s.host, s.profile), []).append(s)
    return list(groups.values())


def trial_order(group: list[Setting], repeats: int) -> Iterator[tuple[int, Setting]]:
    """Repeats interleaved: every setting once, then every setting again."""
    for repeat in range(1, repeats + 1):
        for s in group:
            yield repeat, s


def scenario_files(items: list[Setting], base: dict[str, Any], out: Path) -> dict[str, Path]:
    """Each setting's scenario, written and validated before any load is sent."""
    files = {}
    for s in items:
        files[s.label] = write_scenario(
            out / "scenarios" / f"{s.label}.yaml", trial_scenario(base, s)
        )
        scenarios.load(files[s.label])
    return files


def held_description(settings: ExperimentSettings) -> dict[str, Any]:
    """What the experiment held while the factor varied, for the report."""
    factor = settings.factor
    held: dict[str, Any] = {
        "scenario": settings.scenario or "built-in single-turn chat, ignore_eos",
        "duration per run (s)": settings.duration,
        "repeats": settings.repeats,
        "engine": settings.host or "simulated engine",
        "profile": None if settings.host else (settings.profile or "default"),
        "speedup": None if settings.host else settings.speedup,
    }
    if factor not in ("concurrency", "speculative"):
        held["concurrent users"] = settings.users or ("as the scenario" if settings.scenario else 1)
    if not settings.scenario and factor != "prompt-length":
        held["prompt tokens"] = settings.input_tokens
    if not settings.scenario and factor != "output-length":
        held["output tokens"] = settings.output_tokens
    return held


def build_document(
    settings: ExperimentSettings,
    items: list[Setting],
    results: dict[str, list[TrialResult]],
    out: Path,
    pricing: Pricing | None,
) -> dict[str, Any]:
    """experiment.json: each setting's point (its trials pooled) and the trends read
    along them; checked against its contract (:class:`Experiment`)."""
    factor = settings.factor
    points = []
    for s in items:
        point = point_of(s.label, s.x, results[s.label], out, pricing)
        point.update(profile=s.profile, host=s.host, weight_bytes=s.weight_bytes)
        points.append(point)
    trends = [trend(e, points) for e in EXPECTATIONS.get(factor, ())]
    trends = [t for t in trends if t.xs]  # an unmeasured quantity (endpoint memory) is no trend
    lines = [{**t.to_dict(), "text": t.describe()} for t in trends]
    extra: dict[str, Any] = {}
    if factor == "speculative":
        pairs = speedups(points)
        found = crossover(pairs)
        extra["speculation"] = {"speedups": [list(p) for p in pairs], "crossover": found}
        lines.append(crossover_trend(pairs, found))
    doc = {
        "schema": EXPERIMENT_SCHEMA,
        "factor": factor,
        "title": f"Experiment: {TITLES[factor]}",
        "x_label": X_LABELS[factor],
        "values": [s.label for s in items],
        "repeats": settings.repeats,
        "held": held_description(settings),
        "created_at": datetime.now().isoformat(timespec="seconds"),
        "command": settings.command,
        "points": points,
        "trends": lines,
        **extra,
    }
    parse(Experiment, doc, str(out / "experiment.json"))  # the writer holds to its own contract
    return doc
