"""Results other benchmark tools wrote, read as a baseline: vLLM's ``bench serve`` and GuideLLM.

A team that moves to slogate keeps its history: ``slogate compare`` and the
history dashboard take such a file where they take a run. Only the statistics
both tools measure are read, each kept with the tool's own name for it, so the
output says whose number it is ("vLLM bench serve: p99_ttft_ms"). The format
is told by the file's content, not its name.

- vLLM ``bench serve --save-result`` (``vllm/benchmarks/serve.py``): one JSON
  object; latencies in ms as ``<stat>_<metric>_ms`` (``median``, ``p99``,
  ``p99.9`` of ``ttft``, ``tpot``, ``itl``, ``e2el``), the percentiles
  ``--metric-percentiles`` asked for (99 by default); ``completed``,
  ``failed``, ``request_throughput``, ``output_throughput``. No intervals.
  Its ``itl`` is the gap between chunks, slogate's ITL where a chunk carries
  one token; its ``tpot`` is slogate's TPOT. A file ``--append-result`` grew
  (one result a line) names one as ``FILE#K``.
- GuideLLM's report (``benchmarks.json``, ``GenerativeBenchmarksReport``):
  ``benchmarks[i].metrics.<metric>.successful`` with ``percentiles`` (``p50``
  to ``p999``) and, since 0.8, ``percentile_cis``; ``request_latency`` is in
  seconds, the others in ms; its ``inter_token_latency_ms`` is slogate's TPOT
  (per request); ``request_totals``. A report of several
  benchmarks (a sweep) names one as ``FILE#K``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from slogate.analysis.documents.file_sizes import MAX_DOCUMENT_BYTES, read_bounded
from slogate.analysis.measurement.percentiles import Estimate
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT

BASELINES_FOLDER = "baselines"  # in a results root: other tools' results the dashboard draws
VLLM = "vLLM bench serve"
GUIDELLM = "GuideLLM"
# vLLM bench serve names TTFT, TPOT and ITL as slogate does; its E2E is "e2el"
VLLM_METRICS = {m.name: m.key for m in (TTFT, TPOT, ITL)} | {"e2el": E2E.key}
VLLM_RATES = {"requests_per_s": "request_throughput", "output_tokens_per_s": "output_throughput"}
VLLM_STAT = re.compile(r"^(median|p[0-9.]+)_(ttft|tpot|itl|e2el)_ms$")
# GuideLLM's metric -> (slogate's, the factor to ms). Its inter_token_latency_ms
# is a request's (last token - first) / (tokens - 1): slogate's TPOT, not its
# per-token ITL; its time_per_output_token_ms counts the TTFT in, which no
# slogate metric does, so it is not read.
GUIDELLM_METRICS = {
    "time_to_first_token_ms": (TTFT.key, 1.0),
    "inter_token_latency_ms": (TPOT.key, 1.0),
    "request_latency": (E2E.key, 1000.0),
}
GUIDELLM_RATES = {"requests_per_s": "requests_per_second",
                  "output_tokens_per_s": "output_tokens_per_second"}  # fmt: skip
# percentile names as each tool writes them -> slogate's
PERCENTILE_WORDS = {"50": "p50", "90": "p90", "95": "p95", "99": "p99", "99.9": "p999"}


@dataclass(frozen=True, slots=True)
class OtherStat:
    """One statistic another tool measured: slogate's metric and stat, the tool's
    own name for it and its value (ms for latencies) with its interval if any."""

    metric: str
    stat: str
    name: str
    estimate: Estimate


@dataclass(frozen=True, slots=True)
class OtherRun:
    """Another tool's result file, as much of it as compares with a slogate run."""

    tool: str
    path: str
    latencies: tuple[OtherStat, ...]
    rates: tuple[OtherStat, ...]
    started: str | None = None

    def label(self, stat: OtherStat) -> str:
        return f"{self.tool}: {stat.name}"

    def stat(self, metric: str, stat: str) -> OtherStat | None:
        return next(
            (s for s in (*self.latencies, *self.rates) if (s.metric, s.stat) == (metric, stat)),
            None,
        )


class NotOtherResult(ValueError):
    """A file that is neither tool's result; the message names it."""


def number(value: Any) -> float | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if is_number else None


def exact(value: float, count: int) -> Estimate:
    """A value reported without an interval: taken as exact, so a change counts
    as real when the new run's own interval leaves it out."""
    return Estimate(value=value, lower=value, upper=value, count=count)


def vllm_latencies(doc: dict[str, Any], count: int) -> list[OtherStat]:
    found: dict[tuple[str, str], OtherStat] = {}
    for key, value in doc.items():
        match = VLLM_STAT.match(key)
        v = number(value)
        if match is None or v is None:
            continue
        word, metric = match.groups()
        stat = "p50" if word == "median" else PERCENTILE_WORDS.get(word[1:])
        if stat is None or (word == "median" and (VLLM_METRICS[metric], "p50") in found):
            continue
        found[(VLLM_METRICS[metric], stat)] = OtherStat(
            VLLM_METRICS[metric], stat, key, exact(v, count)
        )
    return list(found.values())


def run_rates(
    total: int, failed: float, failed_name: str, means: dict[str, tuple[str, float | None]]
) -> tuple[OtherStat, ...]:
    """The error rate and the throughputs (``means``: slogate's name -> the
    tool's name and value) as slogate's comparison names them."""
    errors = exact(failed / total, total) if total else None
    rates = [] if errors is None else [OtherStat("error_rate", "rate", failed_name, errors)]
    rates += [
        OtherStat(ours, "run", theirs, exact(v, total))
        for ours, (theirs, v) in means.items()
        if v is not None
    ]
    return tuple(rates)


def read_vllm(doc: dict[str, Any], path: str) -> OtherRun:
    completed = int(number(doc.get("completed")) or 0)
    failed = number(doc.get("failed"))
    if failed is None:  # before vLLM saved ``failed``: the prompts not completed
        failed = max(0.0, (number(doc.get("num_prompts")) or completed) - completed)
    means = {ours: (theirs, number(doc.get(theirs))) for ours, theirs in VLLM_RATES.items()}
    return OtherRun(
        VLLM,
        path,
        tuple(vllm_latencies(doc, completed)),
        run_rates(completed + int(failed), failed, "failed", means),
        started=doc.get("date") if isinstance(doc.get("date"), str) else None,
    )


def guidellm_estimate(summary: dict[str, Any], key: str, scale: float) -> Estimate | None:
    value = number((summary.get("percentiles") or {}).get(key))
    if value is None:
        return None
    count = int(number(summary.get("count")) or 0)
    ci = (summary.get("percentile_cis") or {}).get(key)
    if isinstance(ci, dict) and number(ci.get("lower")) is not None:
        lower, upper = number(ci.get("lower")), number(ci.get("upper"))
        return Estimate(
            value * scale,
            None if lower is None else lower * scale,
            None if upper is None else upper * scale,
            count,
        )
    return exact(value * scale, count)


def chosen(items: list[Any], index: int, path: str, what: str) -> Any:
    """Item ``index`` (from 1) of a file's several results; the only one when
    ``index`` is 0. NotOtherResult saying how to name one."""
    if index == 0 and len(items) > 1:
        raise NotOtherResult(
            f"{path}: {what} of {len(items)} results: name one as {path}#K, K from 1 "
            f"to {len(items)}"
        )
    if not 1 <= (index or 1) <= len(items):
        raise NotOtherResult(f"{path}#{index}: {what} of {len(items)} result(s)")
    return items[(index or 1) - 1]


def read_guidellm(doc: dict[str, Any], path: str, index: int) -> OtherRun:
    benchmark = chosen(doc["benchmarks"], index, path, "a GuideLLM report")
    metrics = benchmark.get("metrics") or {}
    latencies = []
    for theirs, (ours, scale) in GUIDELLM_METRICS.items():
        summary = successful(metrics, theirs)
        for word, stat in PERCENTILE_WORDS.items():
            key = f"p{word.replace('.', '')}"
            e = guidellm_estimate(summary, key, scale)
            if e is not None:
                latencies.append(OtherStat(ours, stat, f"{theirs} {key}", e))
    totals = metrics.get("request_totals") or {}
    means = {
        ours: (f"{theirs} mean", number(successful(metrics, theirs).get("mean")))
        for ours, theirs in GUIDELLM_RATES.items()
    }
    total = int(number(totals.get("total")) or 0)
    errored = number(totals.get("errored")) or 0.0
    rates = run_rates(total, errored, "request_totals.errored", means)
    return OtherRun(GUIDELLM, path, tuple(latencies), rates)


def successful(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    """GuideLLM's summary of metric ``name`` over its successful requests."""
    summary = (metrics.get(name) or {}).get("successful")
    return summary if isinstance(summary, dict) else {}


def is_vllm(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and "completed" in doc
        and "request_throughput" in doc
        and any(VLLM_STAT.match(k) for k in doc)
    )


def is_guidellm(doc: Any) -> bool:
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    return (
        isinstance(benchmarks, list)
        and bool(benchmarks)
        and all(isinstance(b, dict) and isinstance(b.get("metrics"), dict) for b in benchmarks)
        and "time_to_first_token_ms" in benchmarks[0]["metrics"]
    )


def split_index(name: str) -> tuple[Path, int]:
    """``FILE#K`` -> (FILE, K); a plain FILE -> (FILE, 0)."""
    head, sep, tail = name.rpartition("#")
    if sep and tail.isdigit() and not Path(name).exists():
        return Path(head), int(tail)
    return Path(name), 0


def appended_results(raw: bytes) -> list[dict[str, Any]] | None:
    """The results of a file ``bench serve --append-result`` wrote (one JSON
    object a line), or None when it is not one."""
    try:
        docs = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
    except orjson.JSONDecodeError:
        return None
    return docs if docs and all(is_vllm(d) for d in docs) else None


def read_other(name: str) -> OtherRun:
    """The result file ``name`` (``FILE`` or ``FILE#K``); NotOtherResult naming it
    when it is neither tool's, FileNotFoundError when it is missing."""
    path, index = split_index(name)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    raw = read_bounded(path, MAX_DOCUMENT_BYTES)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        appended = appended_results(raw)
        if appended is None:
            raise NotOtherResult(f"{path}: not JSON ({error})") from None
        return read_vllm(chosen(appended, index, str(path), "vLLM's --append-result"), str(path))
    if is_vllm(doc):
        return read_vllm(doc, str(path))
    if is_guidellm(doc):
        return read_guidellm(doc, str(path), index)
    raise NotOtherResult(
        f"{path}: not a results folder, a vLLM bench serve result or a GuideLLM report"
    )


def read_baselines(root: Path, unreadable: list[str] | None = None) -> list[OtherRun]:
    """Other tools' result files in ``root``'s ``baselines/`` folder, by name;
    the names of those that are neither tool's go into ``unreadable``."""
    folder = root / BASELINES_FOLDER
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            found.append(read_other(str(path)))
        except (OSError, ValueError):
            if unreadable is not None:
                unreadable.append(f"{BASELINES_FOLDER}/{path.name}")
    return found
