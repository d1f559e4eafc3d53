"""``summary.json``: the run's numbers and verdicts as one versioned document.

The keys of docs/design.md's results contract (``schema``, ``verdict``, per scenario
``requests``, ``tokens``, ``metrics``, ``throughput``, ``slo``) are what CI
scripts and dashboards read; everything else is added around them. Times are
milliseconds, rates per second, fractions 0..1. A metric without samples has
``count`` 0 and null statistics: a zero would read as an impossibly fast
server. Secrets in the metadata (API keys, auth headers, passwords in URLs) are
masked here, so no output built from the summary can leak them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hdrh.histogram import HdrHistogram

from slogate.analysis.diagnosis.diagnose import diagnose, findings_to_dicts, rate_rps
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.traffic_classes import class_block
from slogate.analysis.documents.versions import SUMMARY_SCHEMA
from slogate.analysis.engine_side.energy import energy_block
from slogate.analysis.engine_side.engine_view import engine_latency, engine_metrics, servers_view
from slogate.analysis.engine_side.speculation import engine_speculation
from slogate.analysis.measurement.costs import Pricing, throughput_cost
from slogate.analysis.measurement.percentiles import STANDARD_PERCENTILES, estimate, summarize
from slogate.analysis.measurement.recorder import (
    MAX_REPLICAS,
    OTHER_REPLICAS,
    PROBE,
    SCHEMA_CACHED,
    SCHEMA_FIRST,
    SESSION_CACHE_HIT,
    Bucket,
    Counters,
)
from slogate.analysis.measurement.speculation import replies_block
from slogate.analysis.measurement.timeseries import apart_series
from slogate.analysis.verdict.generator import ProcessHealth, generator_block, merged, processes
from slogate.analysis.verdict.judge import Judgement, judge
from slogate.analysis.verdict.lag_causes import cause_p99_ms
from slogate.analysis.verdict.slo import (
    RunVerdict,
    SloResult,
    judge_scenario,
    lag_p99_ms,
    proportion_interval,
)
from slogate.scenarios.metrics import ANSWER as ANSWER_GROUP
from slogate.scenarios.metrics import (
    ANSWER_TOKENS,
    CATALOGUE,
    E2E,
    GOODPUT_LIMITS,
    HEADLINE,
    MS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
    SESSION,
    SESSION_ENGINE,
    SESSION_STEPS,
    SESSION_TOKENS,
    SESSION_TOOL,
    SESSION_WALL,
    TOOL_ARG_BYTES,
    TPOT,
    TTFT,
    TTFT_BY_CONTEXT,
    TTFT_IN_BANDS,
    names_of,
)

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import SloEntry

SCHEMA = SUMMARY_SCHEMA
US_PER_MS = 1000.0
ANSWER = names_of(ANSWER_GROUP)
# every latency's distribution but an agent session's parts (the sessions block's)
DETAILED = tuple(m.name for m in CATALOGUE if m.unit == MS and SESSION not in m.groups)
TOKEN_HISTOGRAMS = (
    "input_tokens",
    OUTPUT_TOKENS.name,
    "intended_input_tokens",
    "intended_output_tokens",
    REASONING_TOKENS.name,
    ANSWER_TOKENS.name,
    "inputs",
    TOOL_ARG_BYTES.name,
)
STAGE_PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
TURN_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}
COUNT_METHODS_BEST_FIRST = ("usage", "tokenizer", "chunks")
CHUNK_METHODS_BEST_FIRST = ("exact", "proportional", "one_per_chunk")
RUN_KEYS = (
    "run_id",
    "started_at",
    "ended_at",
    "measured_s",
    "warmup_s",
    "warmup_auto",
    "complete",
    "incomplete_reason",
    "stopped_early",
    "saturation",
    "host",
    "engine",
    "tool_version",
    "git_revision",
    "command",
    "window_s",
    "slice_s",
    "probes_per_s",
    "baseline",
    "cancelled_at_stop",
    "trace_id",
)
MASK = "***"
# Whole words at the end of a key: ``timeout_first_token`` (an error kind) or
# ``max_tokens`` name no secret, ``access_token`` and ``token`` do.
_SECRET_KEY = re.compile(
    r"(?i)((^|[_-])(api[_-]?key|secret|passw(or)?d|authorization|credentials?|cookie"
    r"|(access|auth|bearer|refresh|id|api|session|secret|hf|gh|github)[_-]?token)|^token)$"
)
_SECRET_TEXT = (
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(?:basic|bearer|token)\s+)?[^\s'\",;]+"),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)(bearer\s+)(?!\*\*\*)[^\s'\",;]+"), rf"\1{MASK}"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), f"sk-{MASK}"),
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+@"), rf"\1{MASK}@"),
    (
        re.compile(
            r"(?i)((?:api[_-]?key|secret|passw(?:or)?d|(?<![a-z])token)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!\*\*\*)[^\s&\"',;]+"
        ),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)(--(?:api[_-]?key|token|password|secret)[=\s]+)[^\s'\",;]+"), rf"\1{MASK}"),
)


def redact_text(text: str) -> str:
    """Mask bearer tokens, ``sk-`` keys, URL passwords and ``key=value`` secrets."""
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def secret_key(key: Any, item: Any) -> bool:
    name = str(key)
    return bool(item) and not name.endswith("_env") and _SECRET_KEY.search(name) is not None


def redact(value: Any) -> Any:
    """A copy of ``value`` with secrets masked: values under secret-sounding keys
    (except ``*_env``, which name a variable, not its content) and secrets in text."""
    if isinstance(value, Mapping):
        return {key: MASK if secret_key(key, item) else redact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def in_ms(value_us: float | None) -> float | None:
    return None if value_us is None else round(value_us / US_PER_MS, 3)


def per_mille(value: float | None) -> float | None:
    """A fraction recorded in per mille, as a fraction."""
    return None if value is None else round(value / 1000, 4)


def distribution(
    histogram: HdrHistogram,
    unit_us: bool = True,
    scale: Callable[[float | None], float | None] | None = None,
) -> dict[str, Any]:
    """count, p50..p999, max, mean, min, and each percentile's 95% interval;
    ``scale`` turns a recorded value into the reported one (default: us to ms,
    or as recorded when not ``unit_us``)."""
    scale = scale or (in_ms if unit_us else rounded)
    d = summarize(histogram)
    if d.count == 0:
        empty: dict[str, Any] = dict.fromkeys(("count", *STANDARD_PERCENTILES, "max", "mean"))
        return {**empty, "count": 0, "min": None, "ci": {}}
    out: dict[str, Any] = {"count": d.count}
    out.update({key: scale(e.value) for key, e in d.percentiles.items()})
    out.update(max=scale(d.max), mean=scale(d.mean), min=scale(d.min))
    out["ci"] = {key: [scale(e.lower), scale(e.upper)] for key, e in d.percentiles.items()}
    return out


def quick_percentiles(histogram: HdrHistogram, percentiles: Mapping[str, float]) -> dict[str, Any]:
    """A few percentiles in ms with their intervals, without the costly mean."""
    out: dict[str, Any] = {"count": histogram.get_total_count()}
    for key, p in percentiles.items():
        e = estimate(histogram, p)
        out[key] = in_ms(e.value) if e.count else None
        out[f"{key}_ci"] = [in_ms(e.lower), in_ms(e.upper)] if e.count else [None, None]
    return out


def worst_method(counts: Mapping[str, int], best_first: tuple[str, ...]) -> str | None:
    """The least exact method any request used: it bounds the totals' accuracy."""
    used = [m for m in best_first if counts.get(m)]
    return used[-1] if used else None


def deviation_pct(actual: int, intended: int) -> float | None:
    return rounded(100.0 * (actual - intended) / intended, 2) if intended else None


def requests_block(c: Counters) -> dict[str, Any]:
    lower, upper = proportion_interval(c.failed, c.total)
    return {
        "ok": c.ok,
        "failed": c.failed,
        "total": c.total,
        "cancelled": c.cancelled,
        "errors": dict(sorted(c.errors.items())),
        "error_rate": rounded(c.failed / c.total, 6) if c.total else None,
        "error_rate_ci": [rounded(lower, 6), rounded(upper, 6)],
        "error_samples": redact(dict(sorted(c.error_samples.items()))),
    }


def request_counts(c: Counters) -> dict[str, Any]:
    """:func:`requests_block` without the error samples: for a part of a run (a
    stage, a model, the probes), whose samples the scenario's block already shows."""
    return {k: v for k, v in requests_block(c).items() if k != "error_samples"}


def chunk_gaps_block(c: Counters) -> dict[str, Any]:
    """Gaps between output chunks, and how many were 0: chunks that arrived in
    one read share its instant, so their true gap is unknown (the engine sent
    them together, or the generator read late); ``same_read_stalled``: those
    read while the generator's loop was held (the generator's fault)."""
    share = c.same_read_gaps / c.chunk_gaps if c.chunk_gaps else None
    stalled = c.same_read_stalled_gaps / c.chunk_gaps if c.chunk_gaps else None
    return {
        "total": c.chunk_gaps,
        "same_read": c.same_read_gaps,
        "same_read_share": rounded(share, 6),
        "same_read_stalled": c.same_read_stalled_gaps,
        "same_read_stalled_share": rounded(stalled, 6),
    }


def tokens_block(bucket: Bucket) -> dict[str, Any]:
    c = bucket.counters
    count_method = worst_method(c.count_methods, COUNT_METHODS_BEST_FIRST)
    histograms = bucket.histograms
    return {
        "input": c.input_tokens,
        "output": c.output_tokens,
        "reasoning": c.reasoning_tokens,
        "answer": c.answer_tokens,
        "reasoning_requests": c.reasoning_requests,
        "tool_call_requests": c.tool_call_requests,
        "tool_calls": c.tool_calls,
        "count_method": count_method,
        "approximate": count_method == "chunks",
        "count_methods": dict(c.count_methods),
        "chunk_token_method": worst_method(c.chunk_token_methods, CHUNK_METHODS_BEST_FIRST),
        "chunk_token_methods": dict(c.chunk_token_methods),
        "intended_input": c.intended_input_tokens,
        "intended_output": c.intended_output_tokens,
        "deviation_pct": {
            "input": deviation_pct(c.input_tokens, c.intended_input_tokens),
            "output": deviation_pct(c.output_tokens, c.intended_output_tokens),
        },
        "per_request": {
            name: distribution(histograms.histogram(name), unit_us=False)
            for name in TOKEN_HISTOGRAMS
            if name in histograms
        },
    }


def per_second(amount: int, seconds: float | None) -> float | None:
    return rounded(amount / seconds, 4) if seconds and seconds > 0 else None


def throughput_block(
    c: Counters, seconds: float | None, scheduled_per_s: float | None = None
) -> dict[str, Any]:
    """Successful requests and tokens per second; failed requests are not
    throughput. Open loop: beside them the arrivals per second the schedule
    held (``scheduled_per_s``), so a run that sent or completed fewer shows it."""
    return {
        "scheduled_per_s": rounded(scheduled_per_s, 4),
        "requests_per_s": per_second(c.ok, seconds),
        "output_tokens_per_s": per_second(c.output_tokens, seconds),
        "input_tokens_per_s": per_second(c.input_tokens, seconds),
        "attempted_per_s": per_second(c.total, seconds),
        "goodput_requests_per_s": per_second(c.good, seconds),
        "goodput_tokens_per_s": per_second(c.good_output_tokens, seconds),
        "seconds": seconds,
    }


def goodput_block(
    c: Counters, spec: Mapping[str, Any] | None, seconds: float | None
) -> dict[str, Any]:
    lower, upper = proportion_interval(c.good, c.total)
    spec = spec or {}
    return {
        "good": c.good,
        "total": c.total,
        "fraction": rounded(c.good / c.total, 6) if c.total else None,
        "fraction_ci": [rounded(lower, 6), rounded(upper, 6)],
        "requests_per_s": per_second(c.good, seconds),
        "min_fraction": spec.get("min_fraction"),
        "limits": {k: spec.get(k) for k in GOODPUT_LIMITS if spec.get(k)},
    }


def sessions_block(bucket: Bucket) -> dict[str, Any] | None:
    """Agent sessions: how they ended and the steps they took (None: no agent);
    for replayed trees also their wall time, time on the engine and on tools,
    tokens, and TTFT by context band (docs/reports.md, "Agent sessions")."""
    c = bucket.counters
    if not c.sessions:
        return None
    answered = c.sessions - c.sessions_unfinished - c.sessions_failed
    histograms = bucket.histograms

    def found(name: str, unit_us: bool = True) -> dict[str, Any] | None:
        return distribution(histograms.histogram(name), unit_us) if name in histograms else None

    bands = {
        m.name.removeprefix(TTFT_BY_CONTEXT): found(m.name)
        for m in TTFT_IN_BANDS
        if m.name in histograms
    }
    return {
        "count": c.sessions,
        "answered": answered,
        "unfinished": c.sessions_unfinished,
        "failed": c.sessions_failed,
        "tool_calls": c.tool_calls,
        "steps": found(SESSION_STEPS.name, unit_us=False),
        "wall_ms": found(SESSION_WALL.name),
        "engine_ms": found(SESSION_ENGINE.name),
        "tool_ms": found(SESSION_TOOL.name),
        "tokens": found(SESSION_TOKENS.name, unit_us=False),
        "ttft_by_context_ms": bands if SESSION_ENGINE.name in histograms else None,
    }


def prefix_cache_block(bucket: Bucket) -> dict[str, Any] | None:
    """Prefix-cache hits as the replies reported them (None: no reply said).
    ``hit_rate`` is token-weighted: cached prompt tokens over all prompt tokens
    of the successful requests; a hit is a request with cached_tokens > 0, and
    a reply without the field counts as a miss of 0 cached tokens (vLLM
    releases before 0.32 leave it out then). ``conversations``: each conversation's own rate."""
    c = bucket.counters
    if not c.cache_reported:
        return None
    histograms = bucket.histograms
    per_conversation = (
        distribution(histograms.histogram(SESSION_CACHE_HIT), scale=per_mille)
        if SESSION_CACHE_HIT in histograms
        else None
    )
    return {
        "reported": c.cache_reported,
        "requests": c.ok,
        "hit_requests": c.cache_hits,
        "hit_request_share": rounded(c.cache_hits / c.ok, 6) if c.ok else None,
        "prompt_tokens": c.input_tokens,
        "cached_tokens": c.cached_tokens,
        "hit_rate": rounded(c.cached_tokens / c.input_tokens, 6) if c.input_tokens else None,
        "conversations": per_conversation,
        "ttft_hit_ms": distribution(histograms.histogram("ttft_cache_hit")),
        "ttft_miss_ms": distribution(histograms.histogram("ttft_cache_miss")),
    }


def structured_block(bucket: Bucket) -> dict[str, Any] | None:
    """Structured outputs: validity, the constrained/unconstrained split and
    the compile gap (None: the scenario sent no response_format)."""
    c = bucket.counters
    histograms = bucket.histograms
    if not c.constrained and f"{TTFT.name}_unconstrained" not in histograms:
        return None
    valid = c.constrained - c.schema_invalid
    split = {
        f"{metric}_{kind}_ms": distribution(histograms.histogram(f"{metric}_{kind}"))
        for metric in (TTFT.name, TPOT.name)
        for kind in ("constrained", "unconstrained")
    }
    first = distribution(histograms.histogram(SCHEMA_FIRST))
    cached = distribution(histograms.histogram(SCHEMA_CACHED))
    gap = None
    if first["p50"] is not None and cached["p50"] is not None:
        gap = rounded(first["p50"] - cached["p50"])
    return {
        "constrained": c.constrained,
        "valid": valid,
        "invalid": c.schema_invalid,
        "validity": rounded(valid / c.constrained, 6) if c.constrained else None,
        "invalid_samples": [redact_text(s) for s in c.schema_invalid_samples],
        "schema_first": c.schema_first,
        **split,
        "ttft_schema_first_ms": first,
        "ttft_schema_cached_ms": cached,
        "compile_gap_ms": gap,
    }


def turn_number(name: str) -> int:
    return int(name.removeprefix("ttft_turn_"))


def ttft_by_turn(bucket: Bucket) -> dict[str, Any]:
    turns = sorted(
        (n for n in bucket.histograms.names() if n.startswith("ttft_turn_")), key=turn_number
    )
    return {
        str(turn_number(name)): quick_percentiles(
            bucket.histograms.histogram(name), TURN_PERCENTILES
        )
        for name in turns
    }


def metrics_block(bucket: Bucket, names: tuple[str, ...]) -> dict[str, Any]:
    """The distributions of ``names`` that were recorded (the headline ones
    always). The answer's own latencies appear once a request reasoned:
    without reasoning they repeat the headline ones."""
    histograms = bucket.histograms
    split = bucket.counters.reasoning_requests > 0
    return {
        f"{name}_ms": distribution(histograms.histogram(name))
        for name in names
        if name in HEADLINE or (name in histograms and (split or name not in ANSWER))
    }


def stage_seconds(load: Mapping[str, Any], stage: str, counters: Counters) -> float | None:
    """A stage's planned duration, else the span between its first and last completion."""
    for item in load.get("stages") or []:
        if isinstance(item, Mapping) and item.get("name") == stage and item.get("duration_s"):
            return float(item["duration_s"])
    if counters.first_end_s is not None and counters.last_end_s is not None:
        span = counters.last_end_s - counters.first_end_s
        return span if span > 0 else None
    return None


def scheduled_rate(rate: Any, weight: Any) -> float | None:
    """A scenario's arrivals per second in its schedule: its share of the rate."""
    rps = rate_rps(rate)
    return None if rps is None else rps * float(1.0 if weight is None else weight)


def stage_rate(load: Mapping[str, Any], stage: str, weight: Any) -> float | None:
    for item in load.get("stages") or []:
        if isinstance(item, Mapping) and item.get("name") == stage:
            return scheduled_rate(item.get("rate"), weight)
    return None


def stage_block(
    bucket: Bucket, seconds: float | None, scheduled_per_s: float | None = None
) -> dict[str, Any]:
    histograms = bucket.histograms
    return {
        "requests": request_counts(bucket.counters),
        "throughput": throughput_block(bucket.counters, seconds, scheduled_per_s),
        "metrics": {
            f"{name}_ms": quick_percentiles(histograms.histogram(name), STAGE_PERCENTILES)
            for name in HEADLINE
        },
    }


def slices_block(run: RunData, name: str, declared: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``--slice``: each slice of the run's time (warm-up included, so a drift
    from the start shows) with its headline percentiles and its own verdict on
    the scenario's SLOs. A slice keeps what a time window keeps (TTFT, ITL,
    TPOT, E2E and the counts): an SLO on another metric is inconclusive there."""
    slice_s = run.meta.get("slice_s")
    if not slice_s:
        return []
    health = merged(processes(run.meta))
    blocks = []
    for index, bucket in sorted(run.slices(name).items()):
        results, verdict = judge_scenario(name, declared, bucket, slice_s, health)
        blocks.append(
            {
                "index": index,
                "start_s": index * slice_s,
                "end_s": (index + 1) * slice_s,
                **stage_block(bucket, slice_s),
                "verdict": verdict.value,
                "slo": slo_entries(results),
            }
        )
    return blocks


def apart_blocks(
    run: RunData, name: str, kind: str, health: ProcessHealth | None
) -> dict[str, dict[str, Any]]:
    """One row per endpoint (``kind`` ``endpoint``) or replica: every metric,
    the throughput, the prefix cache (each conversation's own rate too), the
    agent sessions, its own verdict on the scenario's SLOs and its time
    series. A conversation or session counts where its last request went.
    The rows' counts and histograms add up to the scenario's exactly (each
    measured request is in one row), and so do their windows' counts, window
    by window."""
    declared = (run.meta.get("scenarios") or {}).get(name) or {}
    seconds = run.meta.get("measured_s")
    buckets = run.spans(name, f"{kind}:")
    series = apart_series(run.timeseries_apart, name, kind)
    rows = {}
    for key, bucket in sorted(buckets.items()):
        results, verdict = judge_scenario(name, declared, bucket, seconds, health)
        c = bucket.counters
        rows[key] = {
            "verdict": verdict.value,
            "requests": {k: v for k, v in requests_block(c).items() if k != "error_samples"},
            "tokens": tokens_block(bucket),
            "metrics": metrics_block(bucket, DETAILED),
            "throughput": throughput_block(c, seconds),
            "prefix_cache": prefix_cache_block(bucket),
            "sessions": sessions_block(bucket),
            "slo": slo_entries(results),
            "timeseries": series.get(key, []),
        }
    return rows


def replicas_note(replicas: Mapping[str, Any]) -> str | None:
    """Said when the server named more replicas than the run keeps apart."""
    if OTHER_REPLICAS not in replicas:
        return None
    return (
        f"the server named more than {MAX_REPLICAS} replicas: those named after the "
        f"first {MAX_REPLICAS} share the row {OTHER_REPLICAS!r}"
    )


def served_by_header(c: Counters) -> str | None:
    """The response header that named the replicas (the most requests')."""
    found = c.served_by_headers.most_common(1)
    return found[0][0] if found else None


def slo_entry(result: SloResult) -> SloEntry:
    """The judge's verdict on one SLO in the one shape every output reads
    (summary.json, the report, summary.md, JUnit, the terminal table): built
    here only, its numbers rounded once."""
    from slogate.analysis.documents.contracts import SloEntry  # pydantic: not in load processes

    t = result.threshold
    return SloEntry(
        name=result.name,
        metric=t.metric,
        stat=t.stat,
        kind=t.kind,
        threshold=t.limit,
        value=rounded(result.value, 6),
        verdict=result.verdict.value,
        margin=rounded(result.margin, 6),
        margin_pct=rounded(result.margin_pct, 2),
        ci=(rounded(result.lower, 6), rounded(result.upper, 6)),
        n=result.count,
        needed=result.needed,
        note=result.note,
        generator_error_ms=rounded(result.generator_error_ms, 3),
    )


def slo_entries(results: Iterable[SloResult]) -> list[dict[str, Any]]:
    """The SLO entries as summary.json holds them."""
    return [slo_entry(r).model_dump(mode="json") for r in results]


def scenario_block(run: RunData, name: str, verdict: RunVerdict) -> dict[str, Any]:
    declared = (run.meta.get("scenarios") or {}).get(name) or {}
    bucket = run.overall(name)
    c = bucket.counters
    seconds = run.meta.get("measured_s")
    load = declared.get("load") or {}
    weight = declared.get("weight")
    throughput = throughput_block(c, seconds, scheduled_rate(load.get("rate"), weight))
    health = merged(processes(run.meta))
    replicas = apart_blocks(run, name, "replica", health)
    return {
        "verdict": verdict.scenarios[name].value,
        "requests": requests_block(c),
        "tokens": tokens_block(bucket),
        "chunk_gaps": chunk_gaps_block(c),
        "metrics": metrics_block(bucket, DETAILED),
        "throughput": throughput,
        "goodput": goodput_block(c, declared.get("goodput"), seconds),
        "cost": throughput_cost(pricing(run), throughput),
        "slo": slo_entries(r for r in verdict.results if r.scenario == name),
        "ttft_by_turn_ms": ttft_by_turn(bucket),
        "sessions": sessions_block(bucket),
        "prefix_cache": prefix_cache_block(bucket),
        "speculation": replies_block(c),
        "structured_output": structured_block(bucket),
        "stages": {
            stage: stage_block(
                b, stage_seconds(load, stage, b.counters), stage_rate(load, stage, weight)
            )
            for stage, b in sorted(run.stages(name).items())
        },
        "slices": slices_block(run, name, declared),
        "endpoints": apart_blocks(run, name, "endpoint", health),
        "replicas": replicas,
        "served_by_header": served_by_header(c),
        "replicas_note": replicas_note(replicas),
        "traffic_class": redact(class_block(run, name)),
        "source": declared.get("source"),
        "api": declared.get("api"),
        "load": redact(load),
        "config": redact(declared.get("raw") or {}),
    }


def probes_block(run: RunData) -> dict[str, Any] | None:
    """``--probes``: the one-token requests sent beside the load
    (``slogate.locustfiles.probes``), apart from the scenario's own numbers;
    None when the run sent none."""
    found = [(name, b) for (name, span), b in run.buckets.items() if span == PROBE]
    if not found:
        return None
    name, bucket = found[0]  # probes use the first scenario's API and model
    histograms = bucket.histograms
    return {
        "rate_per_s": run.meta.get("probes_per_s"),
        "scenario": name,
        "requests": request_counts(bucket.counters),
        "metrics": {
            f"{m}_ms": distribution(histograms.histogram(m)) for m in (TTFT.name, E2E.name)
        },
    }


def run_energy(run: RunData) -> dict[str, Any] | None:
    """The measured window's GPU energy, per output token and per request
    (``slogate.analysis.engine_side.energy``); None when no GPU energy counter was scraped."""
    warmup = float(run.meta.get("warmup_s") or 0.0)
    measured = run.meta.get("measured_s")
    if not measured:
        return None
    counters = [run.overall(name).counters for name in run.scenario_names()]
    return energy_block(
        run.server_metrics,
        (warmup, warmup + float(measured)),
        sum(c.output_tokens for c in counters),
        sum(c.ok for c in counters),
    )


def model_names(run: RunData) -> dict[str, list[str]]:
    """Scenario names by the model (or adapter) they sent to; ``auto`` is the
    engine's model as discovered."""
    declared = run.meta.get("scenarios") or {}
    engine = (run.meta.get("engine") or {}).get("model") or "auto"
    groups: dict[str, list[str]] = {}
    for name in run.scenario_names():
        model = (declared.get(name) or {}).get("model") or "auto"
        groups.setdefault(engine if model == "auto" else model, []).append(name)
    return groups


def models_block(run: RunData) -> dict[str, Any]:
    """Every metric per model name (adapters apart), the scenarios that used
    it merged exactly."""
    seconds = run.meta.get("measured_s")
    out = {}
    for model, names in sorted(model_names(run).items()):
        bucket = Bucket()
        for name in names:
            bucket.add(run.overall(name))
        c = bucket.counters
        out[model] = {
            "scenarios": names,
            "requests": request_counts(c),
            "tokens": {"input": c.input_tokens, "output": c.output_tokens},
            "metrics": metrics_block(bucket, DETAILED),
            "throughput": throughput_block(c, seconds),
        }
    return out


def build_summary(run: RunData, judgement: Judgement | None = None) -> dict[str, Any]:
    """The summary document of a run as ``judgement`` decided it (judged here
    without a baseline when not given)."""
    judgement = judgement or judge(run)
    verdict = judgement.verdict
    worst = verdict.worst
    meta = run.meta
    summary: dict[str, Any] = {
        "schema": SCHEMA,
        "verdict": verdict.verdict.value,
        "exit_code": judgement.exit_code,
        "invalid_reasons": list(verdict.reasons),
        "worst_slo": None
        if worst is None
        else {"scenario": worst.scenario, **slo_entries([worst])[0]},
        "slo_counts": {
            v: sum(r.verdict.value == v for r in verdict.results)
            for v in ("pass", "fail", "inconclusive", "invalid")
        },
        "run": redact({key: meta.get(key) for key in RUN_KEYS}),
        "generator": generator_summary(run),
        "scenarios": {name: scenario_block(run, name, verdict) for name in run.scenario_names()},
        "models": models_block(run),
        "engine_latency": engine_latency(run),
        "energy": run_energy(run),
        "probes": probes_block(run),
        "engine_metrics": engine_metrics(run),
        "speculation": engine_speculation(run),
        "servers": servers_view(run),
        "server_release": meta.get("server_release"),
    }
    summary["diagnosis"] = findings_to_dicts(diagnose(run, verdict))
    if judgement.comparison is not None:
        summary["baseline"] = judgement.comparison.to_dict()
    elif judgement.baseline_error is not None:
        summary["baseline"] = {"error": judgement.baseline_error}
    return summary


def generator_summary(run: RunData) -> dict[str, Any]:
    """The run's metadata about its load generator, with its self-measurement
    made readable (loop stalls, error bounds, collector pauses; merged and per
    process) in place of the encoded histograms."""
    given = {k: v for k, v in (run.meta.get("generator") or {}).items() if k != "health"}
    block: dict[str, Any] = redact(
        {
            **given,
            "lag_p99_ms": lag_p99_ms(run),
            "lag_cause_p99_ms": cause_p99_ms(run),
            **generator_block(run.meta),
        }
    )
    return block


def pricing(run: RunData) -> Pricing | None:
    """The run's GPU price, when the user gave one (``slogate run --gpu-price-per-hour``)."""
    given = run.meta.get("pricing")
    return None if not given else Pricing(given["gpu_price_per_hour"], given["gpus"])
