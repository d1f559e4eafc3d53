"""llm-d's Benchmark Report v0.2.1: a run's scenarios, a sweep's or a tune's load points.

The report is the shared format of llm-d-benchmark, which converts vLLM's
benchmark, GuideLLM and inference-perf into it (inference-perf writes it
natively): a team that keeps its results there reads slogate's beside them.
One report holds one load point, so a run writes one per scenario and a sweep
one per point. The mapping follows llm-d's own converters: latencies keep
their unit (ms, as vLLM's converter does), ``p999`` is the schema's
``p99p9``, ``failures`` are the failed requests. Every report is checked
against the schema's own text (``llmd/``, with its source and licence) before
it is written, so a file that does not validate is never left behind.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import Distribution, Requests, Throughput

VERSION = "0.2.1"
SCHEMA_FILE = Path(__file__).parent / "llmd" / "br_v0_2_1_json_schema.json"
TOOL = "slogate"
# slogate's latency metrics under the schema's names, each with its unit
LATENCIES = {
    TTFT.key: ("time_to_first_token", "ms"),
    TPOT.key: ("time_per_output_token", "ms/token"),
    ITL.key: ("inter_token_latency", "ms/token"),
    E2E.key: ("request_latency", "ms"),
}
LENGTHS = {"input_tokens": "input_length", "output_tokens": "output_length"}
# a Distribution's statistics under the schema's names
STATISTICS = {
    "mean": "mean", "min": "min", "p50": "p50", "p90": "p90", "p95": "p95",
    "p99": "p99", "p999": "p99p9", "max": "max",
}  # fmt: skip
UUID_SPACE = uuid.UUID("6f1c1f0e-4a53-5a2b-9c1d-510ca7e11d00")


@dataclass(frozen=True)
class LoadPoint:
    """One load point as slogate measured it: what a report is made from.

    ``key`` names the point for good (the same export gives the same ``uid``);
    ``study`` is the sweep or tune it belongs to, None for a plain run."""

    key: str
    description: str
    requests: Requests | None
    metrics: Mapping[str, Distribution]
    throughput: Throughput | None
    lengths: Mapping[str, Distribution] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    rate: float | None = None
    users: float | None = None
    stage: int = 0
    study: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    tool_version: str = "unknown"
    engine: Mapping[str, Any] = field(default_factory=dict)


def statistics(d: Distribution, units: str) -> dict[str, Any] | None:
    """A distribution as the schema's Statistics; None without samples (its mean
    is required)."""
    if not d.count or d.mean is None:
        return None
    stats: dict[str, Any] = {"units": units}
    for ours, theirs in STATISTICS.items():
        value = getattr(d, ours)
        if value is not None:
            stats[theirs] = value
    return stats


def rate(value: float | None, units: str) -> dict[str, Any] | None:
    return None if value is None else {"units": units, "mean": value}


def pruned(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The entries that hold something: the schema's optional fields are left out."""
    return {k: v for k, v in mapping.items() if v is not None and v != {}}


def aggregate(point: LoadPoint) -> dict[str, Any]:
    """results.request_performance.aggregate: requests, latency, throughput."""
    requests: dict[str, Any] = {}
    if point.requests is not None:
        requests = {"total": point.requests.total, "failures": point.requests.failed}
        for ours, theirs in LENGTHS.items():
            d = point.lengths.get(ours)
            requests[theirs] = None if d is None else statistics(d, "count")
    latency = {
        theirs: statistics(point.metrics[ours], units)
        for ours, (theirs, units) in LATENCIES.items()
        if ours in point.metrics
    }
    t = point.throughput
    throughput: dict[str, Any] = {}
    if t is not None:
        total = None
        if t.input_tokens_per_s is not None and t.output_tokens_per_s is not None:
            total = t.input_tokens_per_s + t.output_tokens_per_s
        throughput = {
            "request_rate": rate(t.requests_per_s, "queries/s"),
            "output_token_rate": rate(t.output_tokens_per_s, "tokens/s"),
            "input_token_rate": rate(t.input_tokens_per_s, "tokens/s"),
            "total_token_rate": rate(total, "tokens/s"),
        }
    return pruned(
        {"requests": pruned(requests), "latency": pruned(latency),
         "throughput": pruned(throughput)}
    )  # fmt: skip


def sequence_length(declared: Any, measured: Distribution | None) -> dict[str, Any] | None:
    """The scenario's length as the schema's SequenceLength: a number is fixed, a
    uniform range is uniform, anything else (a distribution slogate samples, a
    trace's lengths) is 'other' at the measured mean."""
    if isinstance(declared, int) and not isinstance(declared, bool):
        return {"distribution": "fixed", "value": declared}
    if isinstance(declared, Mapping) and declared.get("dist") == "uniform":
        low, high = declared.get("min"), declared.get("max")
        if isinstance(low, int) and isinstance(high, int) and 0 <= low <= high and high >= 1:
            return {"distribution": "uniform", "value": (low + high) / 2, "min": low, "max": high}
    if measured is not None and measured.mean is not None:
        return {"distribution": "other", "value": measured.mean}
    return None


def config_id(config: Mapping[str, Any]) -> str:
    """llm-d's ``cfg_id``: a hash of the workload's configuration."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def load(point: LoadPoint) -> dict[str, Any]:
    workload = point.config.get("workload") or {}
    standardized = pruned(
        {
            "tool": TOOL,
            "tool_version": point.tool_version,
            "source": "sampled",
            "stage": point.stage,
            "input_seq_len": sequence_length(
                workload.get("input_tokens"), point.lengths.get("input_tokens")
            )
            or {"distribution": "other", "value": 0},
            "output_seq_len": sequence_length(
                workload.get("output_tokens"), point.lengths.get("output_tokens")
            ),
            "rate_qps": point.rate if point.rate and point.rate > 0 else None,
            "concurrency": point.users,
        }
    )
    return {
        "metadata": {"schema_version": "0.0.1", "cfg_id": config_id(point.config)},
        "standardized": standardized,
        "native": {"config": dict(point.config)},
    }


def stack(point: LoadPoint) -> list[dict[str, Any]]:
    """The engine as a generic component: slogate knows its name and model, not
    its accelerators and parallelism, which the schema's inference engine requires."""
    engine = {k: v for k, v in point.engine.items() if isinstance(v, (str, int, float))}
    standardized = {
        "kind": "generic",
        "tool": str(engine.get("owned_by") or "unknown"),
        "tool_version": "unknown",
        **{k: v for k, v in engine.items() if k not in ("kind", "tool", "tool_version")},
    }
    return [
        {
            "metadata": {"label": "engine", "cfg_id": config_id(engine)},
            "standardized": standardized,
            "native": {"config": engine or None},
        }
    ]


def duration(started: str | None, ended: str | None) -> str | None:
    """ISO-8601 duration between two ISO timestamps."""
    if not started or not ended:
        return None
    seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    return f"PT{seconds:.3f}S"


def report(point: LoadPoint) -> dict[str, Any]:
    """The Benchmark Report of one load point, unchecked."""
    run = pruned(
        {
            "uid": str(uuid.uuid5(UUID_SPACE, point.key)),
            "eid": None if point.study is None else str(uuid.uuid5(UUID_SPACE, point.study)),
            "time": pruned(
                {
                    "start": point.started_at,
                    "end": point.ended_at,
                    "duration": duration(point.started_at, point.ended_at),
                }
            ),
            "description": point.description,
            "keywords": [TOOL],
        }
    )
    return {
        "version": VERSION,
        "run": run,
        "scenario": {"stack": stack(point), "load": load(point)},
        "results": {"request_performance": {"aggregate": aggregate(point)}},
    }


@cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


def problems(document: Any) -> list[str]:
    """Where ``document`` breaks the schema, one line each (empty: it validates).
    An optional field's error comes as "valid under none of" its alternatives:
    the line names the deepest error inside it, the field that is wrong."""
    from jsonschema import Draft202012Validator  # only the export needs it

    validator = Draft202012Validator(schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)
    lines = []
    for error in validator.iter_errors(document):
        while error.context:
            error = max(error.context, key=lambda e: len(e.absolute_path))
        where = ".".join(str(p) for p in error.absolute_path) or "(document)"
        lines.append(f"{where}: {error.message[:200]}")
    return sorted(lines)


class InvalidReport(ValueError):
    """A report that does not hold to llm-d's schema: slogate's mapping is wrong."""


def write_report(path: Path, point: LoadPoint) -> Path:
    """Write the point's report to ``path`` after checking it against the schema."""
    from slogate.reports.results import write_atomic

    document = report(point)
    wrong = problems(document)
    if wrong:
        raise InvalidReport(f"{path}: the llm-d report does not validate: {'; '.join(wrong)}")
    return write_atomic(path, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
