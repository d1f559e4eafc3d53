"""Engine and GPU metrics from Prometheus text, under one set of canonical names.

Every engine names the same facts differently (vLLM ``vllm:num_requests_running``,
SGLang ``sglang:num_running_reqs``, TGI ``tgi_batch_current_size``, llama.cpp
``llamacpp:requests_processing``), and some rename them between releases. The
report charts the engine's view beside the client's, so each scrape is mapped to
the canonical names below once, here, and nothing downstream knows an engine's
spelling. Unknown series are ignored; a series an engine does not expose is
simply absent from the mapping (never reported as 0).

Canonical series (gauges are instantaneous, ``*_total`` are monotonic counters):

- ``running``, ``waiting``: requests being decoded / queued;
- ``kv_cache_usage``: fraction 0..1 of the KV cache in use;
- ``prompt_tokens_total``, ``generation_tokens_total``: token counters;
- ``preemptions_total``: requests evicted and recomputed (SGLang: retractions);
- ``requests_total``: requests finished (vLLM: successes by finish reason);
- ``prefix_cache_hits_total``, ``prefix_cache_queries_total``: tokens;
- ``prompt_seconds_total``: seconds the engine spent computing prompts, each
  request's from the start of its prompt to its first token (llama.cpp);
- ``spec_drafts_total``, ``spec_draft_tokens_total``,
  ``spec_accepted_tokens_total``: speculative decoding's drafts (one per
  sequence per verifying step), the draft tokens verified and those accepted;
  ``spec_accepted_per_position_total:N`` the accepted drafts at position N
  (vLLM's and llama.cpp's ``spec_decode_num_*`` counters);
- ``gpu_utilization`` (0..1, mean over GPUs), ``gpu_memory_used_bytes`` (sum over
  GPUs): from NVIDIA's DCGM exporter.

Latency histograms (vLLM's and SGLang's, in seconds) are kept whole, as their
``sum``, ``count`` and cumulative buckets summed over label sets:

- ``ttft_seconds``: time to first token, as the engine logs it;
- ``itl_seconds``: the gaps between output tokens;
- ``prefill_seconds``, ``decode_seconds``: a request's time in each phase
  (vLLM ``vllm:request_prefill_time_seconds`` and ``_decode_time_seconds``);
- ``kv_transfer_seconds``: disaggregated serving's KV transfers (vLLM's NIXL
  connector, ``vllm:nixl_xfer_time_seconds``). SGLang reports its transfers
  as gauges (``sglang:kv_transfer_latency_ms``, ``kv_transfer_speed_gb_s``),
  read as the ``kv_transfer_ms`` series.

The difference of two scrapes is the engine's own view of the requests served
between them: :func:`histogram_delta` gives it, :func:`bucket_bounds` what its
buckets say about a percentile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from prometheus_client.parser import text_string_to_metric_families

TIERS = ("prefill", "decode")
ROUTER = "router"


@dataclass(frozen=True)
class ScrapeTarget:
    """One metrics endpoint of a run: ``name`` None is the engine (or the
    router) at the run's host; a named one is a replica, of a ``tier`` when
    prefill and decode run apart, or a ``router`` whose series per replica
    are read too (``slogate.analysis.engine_side.router_metrics``)."""

    name: str | None
    url: str
    tier: str | None = None
    router: bool = False


def parse_target(text: str) -> ScrapeTarget | None:
    """``--metrics-url``: ``off`` (None), ``URL`` or ``[TIER:]NAME=URL``, where
    the name ``router`` or the prefix ``router:`` marks the deployment's
    router; ValueError naming what is wrong."""
    if text == "off":
        return None
    head, sep, url = text.partition("=")
    if not sep or "://" in head:
        head, url = "", text
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{text!r}: expected off, URL or [TIER:]NAME=URL with an http(s) URL")
    tier, colon, name = head.rpartition(":")
    if colon and tier not in (*TIERS, ROUTER):
        raise ValueError(f"{text!r}: tier {tier!r}: expected {', '.join(TIERS)} or {ROUTER}")
    if (sep and not head.strip()) or (head and (not name or any(c.isspace() for c in name))):
        raise ValueError(f"{text!r}: a name without spaces before '='")
    router = ROUTER in (tier, name)
    return ScrapeTarget(name or None, url, None if router else tier or None, router)


Combine = Literal["sum", "mean"]

GAUGES = (
    "running",
    "waiting",
    "kv_cache_usage",
    "kv_transfer_ms",
    "gpu_utilization",
    "gpu_memory_used_bytes",
)
COUNTERS = (
    "requests_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "preemptions_total",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
    "prompt_seconds_total",
    "spec_drafts_total",
    "spec_draft_tokens_total",
    "spec_accepted_tokens_total",
)
PER_POSITION = "spec_accepted_per_position_total"
MIB = 1024 * 1024


class MetricsParseError(ValueError):
    """The text is not Prometheus exposition format."""


@dataclass(frozen=True)
class Rule:
    """How one canonical series is read from an engine's samples.

    ``names`` are sample names (as exposed, counters with their ``_total``).
    With ``terms=False`` they are alternatives across releases, the first one
    present wins; with ``terms=True`` all present ones are added (llama.cpp
    counts cached and computed prompt tokens apart). Label sets of one name
    (models, data-parallel engines, GPUs) are combined by ``combine``; with
    ``by_position`` those of each ``position`` label are kept apart, as
    ``canonical:POSITION``.
    """

    canonical: str
    names: tuple[str, ...]
    combine: Combine = "sum"
    scale: float = 1.0
    terms: bool = False
    by_position: bool = False


def speculation_rules(prefix: str) -> tuple[Rule, ...]:
    """vLLM's speculative-decoding counters, which llama.cpp copies under its
    own prefix (``llamacpp:spec_decode_num_drafts_total``...)."""
    base = f"{prefix}spec_decode_num_"
    return (
        Rule("spec_drafts_total", (f"{base}drafts_total",)),
        Rule("spec_draft_tokens_total", (f"{base}draft_tokens_total",)),
        Rule("spec_accepted_tokens_total", (f"{base}accepted_tokens_total",)),
        Rule(PER_POSITION, (f"{base}accepted_tokens_per_pos_total",), by_position=True),
    )


@dataclass(frozen=True)
class HistogramRule:
    """A latency histogram's sample base name per release (the first present wins)."""

    canonical: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Dialect:
    """One engine's metric names: how to recognise them and how to map them.

    ``prefix`` is the namespace the engine puts on every series; NIM 1.x has
    none, so it is recognised by the exact names of its rules.
    """

    name: str
    prefix: str
    rules: tuple[Rule, ...]
    histograms: tuple[HistogramRule, ...] = ()

    def recognises(self, sample_name: str) -> bool:
        if self.prefix:
            return sample_name.startswith(self.prefix)
        return any(sample_name in rule.names for rule in self.rules)


# vLLM: docs.vllm.ai "Production Metrics"; V1 renamed gpu_cache_usage_perc to
# kv_cache_usage_perc and gpu_prefix_cache_* to prefix_cache_*.
VLLM = Dialect(
    "vllm",
    "vllm:",
    (
        Rule("running", ("vllm:num_requests_running",)),
        Rule("waiting", ("vllm:num_requests_waiting",)),
        Rule(
            "kv_cache_usage",
            ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            combine="mean",
        ),
        Rule("prompt_tokens_total", ("vllm:prompt_tokens_total",)),
        Rule("generation_tokens_total", ("vllm:generation_tokens_total",)),
        Rule("preemptions_total", ("vllm:num_preemptions_total",)),
        Rule("requests_total", ("vllm:request_success_total",)),
        Rule(
            "prefix_cache_hits_total",
            ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        ),
        Rule(
            "prefix_cache_queries_total",
            ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        ),
        *speculation_rules("vllm:"),
    ),
    # time_per_output_token_seconds held the token gaps until V1 named them
    # inter_token_latency_seconds (and gave the old name to per-request TPOT)
    (
        HistogramRule("ttft_seconds", ("vllm:time_to_first_token_seconds",)),
        HistogramRule(
            "itl_seconds",
            ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        ),
        HistogramRule("prefill_seconds", ("vllm:request_prefill_time_seconds",)),
        HistogramRule("decode_seconds", ("vllm:request_decode_time_seconds",)),
        HistogramRule("kv_transfer_seconds", ("vllm:nixl_xfer_time_seconds",)),
    ),
)

# SGLang (--enable-metrics): docs.sglang.io "Production Metrics".
SGLANG = Dialect(
    "sglang",
    "sglang:",
    (
        Rule("running", ("sglang:num_running_reqs",)),
        Rule("waiting", ("sglang:num_queue_reqs",)),
        Rule("kv_cache_usage", ("sglang:token_usage",), combine="mean"),
        Rule("prompt_tokens_total", ("sglang:prompt_tokens_total",)),
        Rule("generation_tokens_total", ("sglang:generation_tokens_total",)),
        Rule("preemptions_total", ("sglang:num_retracted_requests_total",)),
        Rule("requests_total", ("sglang:num_requests_total",)),
        Rule("kv_transfer_ms", ("sglang:kv_transfer_latency_ms",), combine="mean"),
        Rule("prefix_cache_hits_total", ("sglang:cached_tokens_total",)),
    ),
    (
        HistogramRule("ttft_seconds", ("sglang:time_to_first_token_seconds",)),
        HistogramRule(
            "itl_seconds",
            ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        ),
    ),
)

# TGI: huggingface.co/docs/text-generation-inference/reference/metrics. Token
# totals are the sums of the per-request histograms; TGI exports no KV usage.
TGI = Dialect(
    "tgi",
    "tgi_",
    (
        Rule("running", ("tgi_batch_current_size",)),
        Rule("waiting", ("tgi_queue_size",)),
        Rule("prompt_tokens_total", ("tgi_request_input_length_sum",)),
        Rule("generation_tokens_total", ("tgi_request_generated_tokens_sum",)),
    ),
)

# llama.cpp server (--metrics): tools/server/server-task.cpp to_metrics().
# prompt_tokens_total excludes tokens reused from the cache, which are counted
# in prompt_tokens_cached_total; kv_cache_usage_ratio exists in older builds.
LLAMACPP = Dialect(
    "llamacpp",
    "llamacpp:",
    (
        Rule("running", ("llamacpp:requests_processing",)),
        Rule("waiting", ("llamacpp:requests_deferred",)),
        Rule("kv_cache_usage", ("llamacpp:kv_cache_usage_ratio",), combine="mean"),
        Rule("prompt_tokens_total", ("llamacpp:prompt_tokens_total",)),
        Rule("prompt_seconds_total", ("llamacpp:prompt_seconds_total",)),
        Rule("generation_tokens_total", ("llamacpp:tokens_predicted_total",)),
        Rule("prefix_cache_hits_total", ("llamacpp:prompt_tokens_cached_total",)),
        Rule(
            "prefix_cache_queries_total",
            ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"),
            terms=True,
        ),
        *speculation_rules("llamacpp:"),
    ),
)

# NVIDIA NIM for LLMs 1.x: docs.nvidia.com/nim/large-language-models
# "Observability", unprefixed names at /v1/metrics.
NIM = Dialect(
    "nim",
    "",
    (
        Rule("running", ("num_requests_running",)),
        Rule("waiting", ("num_requests_waiting",)),
        Rule("kv_cache_usage", ("gpu_cache_usage_perc",), combine="mean"),
        Rule("prompt_tokens_total", ("prompt_tokens_total",)),
        Rule("generation_tokens_total", ("generation_tokens_total",)),
    ),
)

# NVIDIA DCGM exporter default counters: GPU_UTIL in percent, FB_USED in MiB.
DCGM = Dialect(
    "dcgm",
    "DCGM_FI_",
    (
        Rule("gpu_utilization", ("DCGM_FI_DEV_GPU_UTIL",), combine="mean", scale=0.01),
        Rule("gpu_memory_used_bytes", ("DCGM_FI_DEV_FB_USED",), scale=MIB),
        # millijoules since the driver loaded, per GPU: a counter, exposed without
        # _total, which the parser adds (the bare name when declared untyped)
        Rule(
            "gpu_energy_joules",
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
            scale=0.001,
        ),
    ),
)

DIALECTS: tuple[Dialect, ...] = (VLLM, SGLANG, TGI, LLAMACPP, NIM, DCGM)
UNKNOWN = "unknown"


@dataclass
class Snapshot:
    """One scrape, mapped: which dialect, the canonical series, the raw counters.

    ``counters`` keeps every counter of the recognised dialect (its ``_total``
    samples, summed over label sets; not the ``_created`` timestamps) so rates
    of series without a canonical name can still be derived from saved data.
    """

    engine: str
    series: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)


class Sample(NamedTuple):
    name: str
    value: float
    kind: str
    le: float | None = None  # a histogram bucket's upper bound
    position: str | None = None  # a speculative draft position's label


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram: total, count and cumulative (upper bound, count) buckets."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, infinite bound as ``"+Inf"``."""
        buckets = [["+Inf" if math.isinf(le) else le, n] for le, n in self.buckets]
        return {"sum": self.sum, "count": self.count, "buckets": buckets}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        buckets = tuple((float(le), float(n)) for le, n in data["buckets"])
        return cls(float(data["sum"]), float(data["count"]), buckets)


def parse_samples(text: str) -> list[Sample]:
    """Every finite sample in the text, with its family's type; NaN and Inf say nothing."""
    try:
        samples = [
            Sample(
                s.name,
                float(s.value),
                family.type,
                _bucket_bound(s.name, s.labels),
                s.labels.get("position"),
            )
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsParseError(f"not Prometheus text format: {exc}") from exc
    return [s for s in samples if math.isfinite(s.value)]


def _bucket_bound(name: str, labels: Mapping[str, str]) -> float | None:
    if not name.endswith("_bucket") or "le" not in labels:
        return None
    return float(labels["le"])  # "+Inf" parses to inf


def detect_dialect(names: Iterable[str]) -> Dialect | None:
    """The dialect with the most samples whose names it recognises, if any."""
    counts = {d.name: 0 for d in DIALECTS}
    for name in names:
        for d in DIALECTS:
            if d.recognises(name):
                counts[d.name] += 1
    best = max(DIALECTS, key=lambda d: counts[d.name])
    return best if counts[best.name] else None


def map_samples(dialect: Dialect, samples: Iterable[Sample]) -> dict[str, float]:
    """Canonical series of one dialect from parsed samples."""
    values: dict[str, list[float]] = {}
    positions: dict[str, dict[str, float]] = {}
    for sample in samples:
        values.setdefault(sample.name, []).append(sample.value)
        if sample.position is not None:
            per_name = positions.setdefault(sample.name, {})
            per_name[sample.position] = per_name.get(sample.position, 0.0) + sample.value
    series: dict[str, float] = {}
    for rule in dialect.rules:
        if rule.by_position:
            for position, count in positions.get(rule.names[0], {}).items():
                series[f"{rule.canonical}:{position}"] = count * rule.scale
            continue
        value = _apply(rule, values)
        if value is not None:
            series[rule.canonical] = value
    return series


def _apply(rule: Rule, values: Mapping[str, list[float]]) -> float | None:
    present = [n for n in rule.names if values.get(n)]
    if not present:
        return None
    chosen = present if rule.terms else present[:1]
    total = sum(_combine(values[n], rule.combine) for n in chosen)
    return total * rule.scale


def _combine(vs: list[float], how: Combine) -> float:
    return sum(vs) / len(vs) if how == "mean" else sum(vs)


def snapshot(text: str, dialect: Dialect | None = None) -> Snapshot:
    """Parse and map one scrape; ``dialect`` is detected when not given.

    Raises MetricsParseError on text that is not Prometheus format. Text of an
    unknown engine gives an empty Snapshot named ``unknown``.
    """
    samples = parse_samples(text)
    chosen = dialect or detect_dialect(s.name for s in samples)
    if chosen is None:
        return Snapshot(engine=UNKNOWN)
    counters: dict[str, float] = {}
    for s in samples:
        if s.kind == "counter" and s.name.endswith("_total") and chosen.recognises(s.name):
            counters[s.name] = counters.get(s.name, 0.0) + s.value
    return Snapshot(
        engine=chosen.name,
        series=map_samples(chosen, samples),
        counters=counters,
        histograms=map_histograms(chosen, samples),
    )


def map_histograms(dialect: Dialect, samples: Iterable[Sample]) -> dict[str, Histogram]:
    """The dialect's latency histograms, each summed over its label sets
    (models, data-parallel engines: they share the bounds)."""
    totals: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    for sample in samples:
        if sample.le is not None:
            base = sample.name.removesuffix("_bucket")
            per_bound = buckets.setdefault(base, {})
            per_bound[sample.le] = per_bound.get(sample.le, 0.0) + sample.value
        else:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    out = {}
    for rule in dialect.histograms:
        present = [n for n in rule.names if f"{n}_count" in totals and f"{n}_sum" in totals]
        if present:
            name = present[0]
            out[rule.canonical] = Histogram(
                totals[f"{name}_sum"],
                totals[f"{name}_count"],
                tuple(sorted(buckets.get(name, {}).items())),
            )
    return out


def histogram_delta(before: Histogram, after: Histogram) -> Histogram | None:
    """What was observed between two scrapes of one histogram; None when the
    engine restarted in between (its counts went down) or the bounds changed."""
    bounds = [le for le, _ in after.buckets]
    if after.count < before.count or bounds != [le for le, _ in before.buckets]:
        return None
    buckets = tuple(
        (le, n1 - n0) for (le, n1), (_, n0) in zip(after.buckets, before.buckets, strict=True)
    )
    if any(n < 0 for _, n in buckets):
        return None
    return Histogram(after.sum - before.sum, after.count - before.count, buckets)


def bucket_bounds(histogram: Histogram, quantile: float) -> tuple[float, float] | None:
    """The bucket the ``quantile`` (0..1) falls in: (lower, upper) bound, upper
    infinite in the last; None without observations or buckets. A histogram
    says no more than that (interpolating inside a bucket is a guess)."""
    if histogram.count <= 0 or not histogram.buckets:
        return None
    rank = max(math.ceil(quantile * histogram.count), 1)
    lower = 0.0
    for le, cumulative in histogram.buckets:
        if cumulative >= rank:
            return lower, le
        lower = le
    return lower, math.inf
