"""The documents slogate writes for other programs, as typed models: summary.json,
sweep.json, experiment.json, a repeat set's summary.json, tune.json and the saved
run data (``data/run.json``).

Each is defined once here; ``slogate schema NAME`` prints its JSON Schema, and
readers parse through these models instead of digging keys, so a document that
lacks a field, or holds the wrong type, is refused with the field's path.

The keys named here are the contract (docs/design.md, docs/reports.md): they
stay, with their types. Documents carry more around them (``extra="allow"``):
new keys may be added without a new version; removing or retyping a key here
is a breaking change and bumps the document's ``schema`` version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slogate.analysis.documents.file_sizes import MAX_DOCUMENT_BYTES, read_bounded
from slogate.analysis.documents.versions import (
    ExperimentSchema,
    RepeatsSchema,
    RundataSchema,
    SummarySchema,
    SweepSchema,
    TuneSchema,
)

VerdictName = Literal["pass", "fail", "inconclusive", "invalid"]
Number = float | None
Interval = tuple[Number, Number]
UserNumber = int | float  # as the user wrote it: 2000 stays 2000, not 2000.0


class Contract(BaseModel):
    """A document's part: the typed keys, anything else kept as it is."""

    model_config = ConfigDict(extra="allow", frozen=True)


class SloEntry(Contract):
    """One SLO as judged: the value in the metric's unit, its 95% interval, the
    headroom (negative when failing) and the verdict."""

    name: str
    metric: str
    stat: str
    kind: Literal["max", "min"]
    threshold: float
    value: Number
    verdict: VerdictName
    margin: Number = None
    margin_pct: Number = None
    ci: Interval = (None, None)
    n: int = 0
    needed: int | None = None
    note: str = ""
    generator_error_ms: Number = None


class WorstSlo(SloEntry):
    scenario: str


class Distribution(Contract):
    """A metric's distribution: count, percentiles (p50..p999), max, mean, min
    and each percentile's interval; statistics are null without samples."""

    count: int
    p50: Number = None
    p90: Number = None
    p95: Number = None
    p99: Number = None
    p999: Number = None
    max: Number = None
    mean: Number = None
    min: Number = None
    ci: dict[str, Interval] = Field(default_factory=dict)

    def interval(self, key: str) -> Interval:
        """The 95% interval of percentile ``key`` (open without samples)."""
        return self.ci.get(key) or (None, None)


class QuickDistribution(Contract):
    """A few percentiles with their intervals beside them (``p99_ci``), without
    the costly mean: a stage's metrics, TTFT by conversation turn."""

    count: int
    p50: Number = None
    p50_ci: Interval | None = None
    p90: Number = None
    p90_ci: Interval | None = None
    p95: Number = None
    p95_ci: Interval | None = None
    p99: Number = None
    p99_ci: Interval | None = None

    def interval(self, key: str) -> Interval:
        """The 95% interval of percentile ``key`` (open where not measured)."""
        return getattr(self, f"{key}_ci", None) or (None, None)


class Requests(Contract):
    """``total`` is ok + failed; ``cancelled`` (by the client, as the scenario
    planned) are apart: in no latency, error rate or goodput."""

    ok: int
    failed: int
    total: int
    cancelled: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    error_rate: Number = None
    error_rate_ci: Interval = (None, None)
    error_samples: dict[str, list[str]] = Field(default_factory=dict)


class Tokens(Contract):
    """Token totals, how they were counted, and what the workload intended."""

    input: int
    output: int
    count_method: Literal["usage", "tokenizer", "chunks"] | None = None
    reasoning: int = 0
    answer: int = 0
    reasoning_requests: int = 0
    tool_call_requests: int = 0
    tool_calls: int = 0
    approximate: bool = False
    count_methods: dict[str, int] = Field(default_factory=dict)
    chunk_token_method: str | None = None
    chunk_token_methods: dict[str, int] = Field(default_factory=dict)
    intended_input: int = 0
    intended_output: int = 0
    deviation_pct: dict[str, Number] = Field(default_factory=dict)
    per_request: dict[str, Distribution] = Field(default_factory=dict)


class Throughput(Contract):
    scheduled_per_s: Number = None
    requests_per_s: Number = None
    output_tokens_per_s: Number = None
    input_tokens_per_s: Number = None
    attempted_per_s: Number = None
    goodput_requests_per_s: Number = None
    goodput_tokens_per_s: Number = None
    seconds: Number = None


class ChunkGaps(Contract):
    """Gaps between output chunks, and those of 0 (chunks read together)."""

    total: int
    same_read: int
    same_read_share: Number = None
    same_read_stalled: int = 0
    same_read_stalled_share: Number = None


class Goodput(Contract):
    """Requests that met every goodput limit, as a fraction and a rate."""

    good: int
    total: int
    fraction: Number = None
    fraction_ci: Interval = (None, None)
    requests_per_s: Number = None
    min_fraction: UserNumber | None = None
    limits: dict[str, UserNumber] = Field(default_factory=dict)


class Cost(Contract):
    """Cost per million tokens at a throughput; ``basis`` names which throughput."""

    basis: str
    gpu_price_per_hour: float
    gpus: int
    price_per_hour: float
    output_tokens_per_s: Number = None
    input_tokens_per_s: Number = None
    per_million_output_tokens: Number = None
    per_million_input_tokens: Number = None
    goodput_tokens_per_s: Number = None
    per_million_goodput_tokens: Number = None


class Sessions(Contract):
    """Agent sessions: how they ended and the steps they took; a replayed
    agent tree (``kind: agent-trace``) adds the answered sessions' wall time,
    their requests' time added up (``engine_ms``), their replayed tool and
    think waits (``tool_ms``), their prompt and output tokens, and the TTFT of
    their requests by context band (``0_8k``, ``8_32k``, ``32_128k``, ``128k_up``)."""

    count: int
    answered: int
    unfinished: int
    failed: int
    tool_calls: int
    steps: Distribution | None = None
    wall_ms: Distribution | None = None
    engine_ms: Distribution | None = None
    tool_ms: Distribution | None = None
    tokens: Distribution | None = None
    ttft_by_context_ms: dict[str, Distribution] | None = None


class PrefixCache(Contract):
    """Prefix-cache hits as the server's replies reported them: the
    token-weighted hit rate (cached prompt tokens / prompt tokens), the
    requests with a hit (cached_tokens > 0), each conversation's own rate,
    and TTFT of hits and misses apart."""

    reported: int
    requests: int
    hit_requests: int
    hit_request_share: Number = None
    prompt_tokens: int
    cached_tokens: int
    hit_rate: Number = None
    conversations: Distribution | None = None
    ttft_hit_ms: Distribution
    ttft_miss_ms: Distribution


class ReplySpeculation(Contract):
    """Speculative drafts as the replies reported them (llama.cpp's
    ``timings.draft_n``, ``draft_n_accepted``), summed over the successful
    requests that said."""

    requests: int
    draft_tokens: int
    accepted_tokens: int
    acceptance_rate: Number = None


class SpeculationWindow(Contract):
    """The engine's acceptance between two scrapes, at the later one's time."""

    t_s: float
    window_s: float
    acceptance_rate: Number = None
    mean_accepted_length: Number = None


class EngineSpeculation(Contract):
    """Speculative decoding as the engine counted it over the measured window:
    drafts, draft tokens, accepted tokens, the acceptance rate, the mean
    accepted length (1 + accepted / drafts), each draft position's acceptance
    and the rate between scrapes."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    acceptance_rate: Number = None
    mean_accepted_length: Number = None
    per_position: list[Number] = Field(default_factory=list)
    windows: list[SpeculationWindow] = Field(default_factory=list)


class StructuredOutput(Contract):
    """Structured outputs (``response_format``): the constrained successful
    requests, how many answers met their schema (``validity``: the share),
    those that broke it named (``invalid_samples``); TTFT and TPOT of the
    constrained and unconstrained requests apart; and a constrained
    request's TTFT by whether its schema was new to its load process or seen
    before, whose medians' difference (``compile_gap_ms``) is the engine's
    grammar compile as the client sees it."""

    constrained: int
    valid: int
    invalid: int
    validity: Number = None
    invalid_samples: list[str] = Field(default_factory=list)
    schema_first: int
    ttft_constrained_ms: Distribution
    ttft_unconstrained_ms: Distribution
    tpot_constrained_ms: Distribution
    tpot_unconstrained_ms: Distribution
    ttft_schema_first_ms: Distribution
    ttft_schema_cached_ms: Distribution
    compile_gap_ms: Number = None


class StageSummary(Contract):
    requests: Requests
    throughput: Throughput
    metrics: dict[str, QuickDistribution]


class SliceSummary(StageSummary):
    """``--slice``: one slice of the run's time (seconds from its start), its
    headline percentiles and its own verdict on the scenario's SLOs."""

    index: int
    start_s: float
    end_s: float
    verdict: VerdictName
    slo: list[SloEntry]


class Window(Contract):
    """One window of a time series (``t_s`` seconds from the run's start,
    warm-up included): the requests that ended in it, their rates and their
    headline percentiles in ms (None: no request measured it; ITL is not kept
    in an endpoint's or replica's windows, for its per-token cost)."""

    t_s: float
    window_s: float
    requests_ok: int
    requests_failed: int
    errors: dict[str, int] = Field(default_factory=dict)
    requests_per_s: float
    output_tokens_per_s: float
    input_tokens_per_s: float
    ttft_p50_ms: Number = None
    ttft_p99_ms: Number = None
    itl_p50_ms: Number = None
    itl_p99_ms: Number = None
    tpot_p50_ms: Number = None
    tpot_p99_ms: Number = None
    e2e_p50_ms: Number = None
    e2e_p99_ms: Number = None
    spec_acceptance_rate: Number = None


class ApartSummary(Contract):
    """One endpoint's (or replica's) share of a scenario: its rows add up to
    the scenario's exactly, and it has its own verdict on the scenario's SLOs.
    ``timeseries``: its windows; in each, the endpoints' (or replicas')
    counts add up to the scenario's window in data/run.json. A conversation's
    own prefix-cache rate and an agent session count where their last
    request went."""

    verdict: VerdictName
    requests: Requests
    tokens: Tokens
    metrics: dict[str, Distribution]
    throughput: Throughput
    prefix_cache: PrefixCache | None = None
    sessions: Sessions | None = None
    slo: list[SloEntry]
    timeseries: list[Window] = Field(default_factory=list)


class ClassSummary(Contract):
    """A traffic class's own numbers beside its scenario's (its verdict and SLOs
    are the scenario's): what it sent, the seconds its requests waited for
    their first tokens and its share of all classes' wait, the requests shed
    with HTTP 429 or 503, and the engine's preemptions over the run, all
    classes together (None: the engine exports no counter)."""

    priority: int | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] = Field(default_factory=dict)
    wait_s: float
    wait_share: Number = None
    sheds: dict[str, int] = Field(default_factory=dict)
    engine_preemptions: Number = None


class ScenarioSummary(Contract):
    verdict: VerdictName
    requests: Requests
    tokens: Tokens
    metrics: dict[str, Distribution]
    throughput: Throughput
    slo: list[SloEntry]
    chunk_gaps: ChunkGaps | None = None
    goodput: Goodput | None = None
    cost: Cost | None = None
    ttft_by_turn_ms: dict[str, QuickDistribution] = Field(default_factory=dict)
    sessions: Sessions | None = None
    prefix_cache: PrefixCache | None = None
    speculation: ReplySpeculation | None = None
    structured_output: StructuredOutput | None = None
    stages: dict[str, StageSummary] = Field(default_factory=dict)
    slices: list[SliceSummary] = Field(default_factory=list)
    endpoints: dict[str, ApartSummary] = Field(default_factory=dict)
    replicas: dict[str, ApartSummary] = Field(default_factory=dict)
    served_by_header: str | None = None  # the response header that named the replicas
    replicas_note: str | None = None  # set when more replicas were named than kept apart
    traffic_class: ClassSummary | None = None  # a mix member with a class
    source: str | None = None
    api: str | None = None
    load: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


class ModelSummary(Contract):
    """One model name's numbers, the scenarios that sent to it merged."""

    scenarios: list[str]
    requests: Requests
    tokens: Tokens
    metrics: dict[str, Distribution]
    throughput: Throughput


class Remedy(Contract):
    """A setting of the finding's action as a tune varies it, and which way."""

    engine: str
    setting: str
    direction: Literal["up", "down", "on"]


class Finding(Contract):
    """A cause the data shows, the evidence for it and the SLOs it explains:
    ``share``, per SLO metric, the fraction (0..1) of its miss the cause
    accounts for (measured from the requests' timelines; absent where not);
    ``engine_metrics`` whether the engine's own metrics agree, disagree or are
    absent (null: no rule reads them for this cause) and ``engine_text`` their
    numbers; ``action`` the engine setting to try and the experiment to run,
    ``remedies`` its settings by the names a tune varies (absent before they
    were written: read as none)."""

    cause: str
    scenario: str | None = None
    text: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    explains: list[str] = Field(default_factory=list)
    share: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    engine_metrics: Literal["agree", "disagree", "absent"] | None = None
    engine_text: str = ""
    action: str = ""
    remedies: list[Remedy] = Field(default_factory=list)


class StoppedEarly(Contract):
    """``--abort-on-fail`` stopped the run: when (seconds since the start, and
    of measurement), on which SLO, and why it could no longer pass."""

    at_s: float
    measured_s: float
    scenario: str
    slo: str
    reason: str


class SaturationFound(Contract):
    """When a scenario was first found past saturation, and the two trends:
    ``held_back``, the queue counted arrivals held at the in-flight cap;
    ``ttft_from_schedule``, TTFT was taken from the scheduled instants;
    ``finished_per_s`` and ``offered_per_s``, the engine's rate against the
    schedule's (docs/load.md, "Saturation")."""

    at_s: float
    scenario: str
    confidence: float
    in_flight_per_s: float
    ttft_ms_per_s: float
    windows: int
    reason: str
    held_back: bool = False
    ttft_from_schedule: bool = False
    finished_per_s: Number = None
    offered_per_s: Number = None


class SaturationCheck(Contract):
    """``--saturation``: the mode, what it found (None: never past saturation),
    and whether it ended the run."""

    mode: Literal["monitor", "stop"]
    found: SaturationFound | None = None
    stopped: bool = False


class WarmupAuto(Contract):
    """``--warmup auto``: the cut MSER found (``found_s``: the start of the first
    window kept, the latest over each scenario's TTFT and ITL series), the cut
    applied (``cut_s``, rounded up to the segments the recorder keeps; it is
    ``run.warmup_s``), each series' own cut and whether all settled in the
    first half of the run."""

    method: str
    found_s: float
    cut_s: float
    series: dict[str, Number] = Field(default_factory=dict)
    settled: bool
    note: str = ""


class RunInfo(Contract):
    """Where and when the run was made (secrets already masked), its keys in
    the order summary.json writes them."""

    run_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    measured_s: Number = None
    warmup_s: Number = None
    warmup_auto: WarmupAuto | None = None
    complete: bool | None = None
    incomplete_reason: str | None = None
    stopped_early: StoppedEarly | None = None
    saturation: SaturationCheck | None = None
    host: str | None = None
    engine: dict[str, Any] | None = None
    tool_version: str | None = None
    git_revision: str | None = None
    command: str | None = None
    window_s: Number = None
    slice_s: Number = None
    probes_per_s: Number = None
    baseline: str | None = None
    cancelled_at_stop: int | None = None
    trace_id: str | None = None  # the run's trace (docs/load.md, "Request identity")


class EngineLatencyStat(Contract):
    """One latency as the engine's histogram logged it over the measured window
    (count, mean in ms, the bucket each percentile falls in) beside the
    client's count and mean, and the client's mean minus the engine's."""

    count: int
    mean: Number = None
    buckets: dict[str, Interval | None] = Field(default_factory=dict)
    client_count: int = 0
    client_mean: Number = None
    client_minus_engine: Number = None


class EnginePrefixCache(Contract):
    """The engine's prefix-cache counters (tokens) over the window, and its hit
    rate, beside the client's rate from the replies' cached_tokens (null when
    no reply said)."""

    engine_hits: float
    engine_queries: float
    engine_hit_rate: Number = None
    client_cached_tokens: int | None = None
    client_prompt_tokens: int = 0
    client_hit_rate: Number = None


class EngineLatency(Contract):
    """The engine's own TTFT and ITL (from its scraped histograms), when it
    exports them, and its prefix-cache hit rate beside the client's."""

    engine: str | None = None
    window_s: Interval = (None, None)
    ttft_ms: EngineLatencyStat | None = None
    itl_ms: EngineLatencyStat | None = None
    prefix_cache: EnginePrefixCache | None = None


class GaugeStat(Contract):
    """One engine gauge over the measured window's scrapes."""

    mean: float
    max: float


class EngineMetrics(Contract):
    """The engine's own counters (growth) and gauges over the measured window,
    under slogate's canonical names (docs/engines.md), when it exports them."""

    engine: str | None = None
    window_s: Interval = (None, None)
    scrapes: int = 0
    counters: dict[str, float] = Field(default_factory=dict)
    gauges: dict[str, GaugeStat] = Field(default_factory=dict)


class RouterRoute(Contract):
    """A router's account of one replica over the measured window: requests
    it sent there and failures (counters' growth), requests in flight,
    queued, and per second (gauges' mean and peak); absent where the router
    does not export it."""

    dispatched_total: Number = None
    errors_total: Number = None
    in_flight: GaugeStat | None = None
    waiting: GaugeStat | None = None
    qps: GaugeStat | None = None
    active_decode_blocks: GaugeStat | None = None  # Dynamo's KV router
    active_prefill_tokens: GaugeStat | None = None


class ServerView(EngineMetrics):
    """One named replica's own metrics (``--metrics-url NAME=URL``), its tier
    (prefill, decode) when prefill and decode run apart."""

    tier: Literal["prefill", "decode"] | None = None
    time_ms: dict[str, float] = Field(default_factory=dict)  # mean per request, by phase
    routes: dict[str, RouterRoute] | None = None  # a router's (``--metrics-url router=URL``)


class LoopStall(Contract):
    """The load generator's loop delays, in ms, and the milliseconds they sample."""

    p50: Number = None
    p99: Number = None
    max: Number = None
    mean: Number = None
    samples: int = 0


class LoopHeld(Contract):
    """The stalls' total time in ms and how the loop's thread spent it (null
    parts where the kernel does not tell); the machine's share of CPU time its
    hypervisor took over the window (steal, part of ``stopped_or_blocked``)."""

    total: float
    running: Number = None
    waiting_for_cpu: Number = None
    stopped_or_blocked: Number = None
    machine_steal_share: Number = None


class Collector(Contract):
    collections: int
    by_generation: list[int] = Field(default_factory=list)
    max_pause_ms: float
    total_pause_ms: float


class SelfMeasurement(Contract):
    """A load generator's own error: its loop's stalls, the error bound they
    put on each TTFT and ITL statistic (ms), and its collector's pauses."""

    loop_stall_ms: LoopStall
    loop_held_ms: LoopHeld
    error_bound_ms: dict[str, dict[str, Number]]
    gc: Collector


class ProcessMeasurement(SelfMeasurement):
    pid: int | None = None
    cpu_s: float
    cpu_share: Number = None


class Generator(Contract):
    """The load generator: its metadata (kept as written, around the typed
    keys) and its self-measurement, merged and per process, when it made one."""

    loop_stall_ms: LoopStall | None = None
    loop_held_ms: LoopHeld | None = None
    error_bound_ms: dict[str, dict[str, Number]] | None = None
    gc: Collector | None = None
    per_process: dict[str, ProcessMeasurement] = Field(default_factory=dict)


class Estimate(Contract):
    value: float
    lower: Number = None
    upper: Number = None
    count: int


class Delta(Contract):
    """One statistic of one metric, baseline against this run; for a latency, how
    far the two runs' load generators can have moved it apart (ms)."""

    scenario: str
    metric: str
    stat: str
    base: Estimate | None = None
    new: Estimate | None = None
    change: Number = None
    change_pct: Number = None
    status: str
    gated: bool
    regression: bool
    cannot_tell: bool = False
    generator_error_ms: Number = None
    base_name: str | None = None  # the baseline's own name, when another tool made it


class Comparison(Contract):
    """The regression verdict against a baseline run."""

    base_run: str | None = None
    new_run: str | None = None
    tolerance: float
    gated: list[str]
    verdict: str
    exit_code: int
    regressions: int
    cannot_tell: int = 0
    allow_uncertain: bool = False
    only_in_base: list[str] = Field(default_factory=list)
    only_in_new: list[str] = Field(default_factory=list)
    deltas: list[Delta] = Field(default_factory=list)


class BaselineError(Contract):
    """A baseline named but not compared, and why."""

    error: str


class ServerRelease(Contract):
    """Whether the engine let go of the requests the client closed (cancelled,
    or cut off at the stop): its running-requests gauge after the load, polled
    until it is back at its level before the run (``released``) or the bound
    passed; null ``released``: not checked (no such gauge, or no reading)."""

    cancelled: int
    cancelled_at_stop: int
    bound_s: float
    running_before: Number = None
    running_after: Number = None
    peak_after: Number = None
    waited_s: Number = None
    released: bool | None = None


class Energy(Contract):
    """The GPUs' energy over the measured window, from DCGM's total-energy counter."""

    source: str
    mean_power_w: float
    joules: float
    seconds: float
    scraped_s: list[float]
    output_tokens: int
    requests: int
    per_output_token_j: Number = None
    per_request_j: Number = None


class Probes(Contract):
    """``--probes``: one-token requests sent beside the load, outside its
    concurrency limit, to the first scenario's API and model; apart from every
    scenario's own numbers."""

    rate_per_s: Number = None
    scenario: str
    requests: Requests
    metrics: dict[str, Distribution]


class Summary(Contract):
    """summary.json: a run's verdict, exit code and numbers per scenario."""

    schema_: SummarySchema = Field(alias="schema")
    verdict: VerdictName
    exit_code: int
    invalid_reasons: list[str] = Field(default_factory=list)
    worst_slo: WorstSlo | None = None
    slo_counts: dict[VerdictName, int] = Field(default_factory=dict)
    run: RunInfo = Field(default_factory=RunInfo)
    generator: Generator = Field(default_factory=Generator)
    scenarios: dict[str, ScenarioSummary]
    models: dict[str, ModelSummary] = Field(default_factory=dict)
    engine_latency: EngineLatency | None = None
    energy: Energy | None = None
    probes: Probes | None = None
    engine_metrics: EngineMetrics | None = None
    speculation: EngineSpeculation | None = None
    servers: dict[str, ServerView] = Field(default_factory=dict)
    server_release: ServerRelease | None = None
    diagnosis: list[Finding] = Field(default_factory=list)
    baseline: Comparison | BaselineError | None = None


class PointRun(Contract):
    """One run behind a point: its folder (relative to the study's), verdict and
    exit code ("error" when it wrote no summary), and its scenario's block."""

    dir: str
    repeat: int | None = None
    verdict: VerdictName | Literal["error"]
    exit_code: int
    scenario: ScenarioSummary | None = None


class SweepPoint(Contract):
    """A load level or a setting: the runs behind it and their data pooled
    (histograms merged exactly), and its cost when a price was given."""

    x: UserNumber | None = None
    label: str | None = None
    runs: list[PointRun] = Field(default_factory=list)
    requests: Requests | None = None
    metrics: dict[str, Distribution] = Field(default_factory=dict)
    throughput: Throughput | None = None
    cost: Cost | None = None
    weight_bytes: int | None = None


class Knee(Contract):
    """Where a percentile of a metric starts to climb against the load."""

    x: UserNumber
    y: UserNumber
    metric: str
    stat: str


class SearchTrial(Contract):
    value: UserNumber
    confirmation: bool
    passed: bool
    verdict: VerdictName | Literal["error"]
    dir: str
    limiting: str | None = None


class MaxSearch(Contract):
    """The search for the max load under SLO: its bracket and every trial it ran."""

    max: Number = None
    confirmed: bool
    highest_pass: Number = None
    lowest_fail: Number = None
    tolerance: float
    finished: bool
    trials: list[SearchTrial]


class TierSlo(Contract):
    metric: str
    stat: str
    threshold: float
    kind: str


class TierPoint(Contract):
    x: float
    passed: bool


class SloTier(Contract):
    """One SLO tier of a sweep: its thresholds, its verdict at each load tried
    and the most load under it."""

    name: str
    slo: list[TierSlo]
    points: list[TierPoint]
    max: Number = None
    unit: str


class Sweep(Contract):
    """sweep.json: each load level's trials, the maximum under SLO and the knee;
    with ``slo_tiers`` in the scenario, the maximum under each tier."""

    schema_: SweepSchema = Field(alias="schema")
    mode: str
    unit: str
    scenario: str
    created_at: str
    command: str
    slo: list[WorstSlo]
    points: list[SweepPoint]
    max: Number = None
    limiting_slo: WorstSlo | None = None
    knee: Knee | None = None
    find_max: MaxSearch | None = None
    cost_at_max: Cost | None = None
    headline: str
    findings: list[str]
    skipped_levels: list[float] = Field(default_factory=list)
    tiers: list[SloTier] = Field(default_factory=list)


class ExperimentTrend(Contract):
    """An expected trend (``claim``: ``path`` moves as ``expected``) and whether it held."""

    claim: str | None = None
    metric: str | None = None
    expected: str | None = None
    observed: str | None = None
    holds: bool = False
    text: str


class Experiment(Contract):
    """experiment.json: one factor varied, the points measured and the trends read."""

    schema_: ExperimentSchema = Field(alias="schema")
    factor: str
    title: str
    x_label: str
    values: list[str]
    repeats: int
    held: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    command: str
    points: list[SweepPoint]
    trends: list[ExperimentTrend]


class SpreadEntry(Contract):
    """One statistic across the runs of a repeat set: each run's value (null: a
    run without it), their mean, sample sd, CV and the Student-t interval of the mean."""

    values: list[Number]
    n: int
    mean: Number = None
    sd: Number = None
    cv: Number = None
    ci: Interval = (None, None)
    confidence: float


class RepeatSlo(SpreadEntry):
    """An SLO judged on its spread across the runs (docs/ci.md, "Repeats")."""

    name: str
    metric: str
    stat: str
    kind: Literal["max", "min"]
    threshold: float
    verdict: VerdictName
    run_verdicts: list[VerdictName | None]


class RepeatScenario(Contract):
    verdict: VerdictName
    slo: list[RepeatSlo]
    metrics: dict[str, dict[str, SpreadEntry]] = Field(default_factory=dict)
    throughput: dict[str, SpreadEntry] = Field(default_factory=dict)


class RepeatRun(Contract):
    """One run of a repeat set: its folder (relative), verdict and exit code."""

    index: int
    dir: str
    verdict: str
    exit_code: int
    started_at: str | None = None
    measured_s: Number = None
    report: str | None = None


class Repeats(Contract):
    """A repeat set's summary.json (``slogate run --repeat N``): each run and the
    combined verdict on the spread of each SLO statistic across them."""

    schema_: RepeatsSchema = Field(alias="schema")
    verdict: VerdictName
    exit_code: int
    invalid_reasons: list[str] = Field(default_factory=list)
    created_at: str
    command: str | None = None
    repeat: int
    cooldown_s: float
    runs: list[RepeatRun]
    scenarios: dict[str, RepeatScenario]
    baseline: Comparison | BaselineError | None = None


class TuneTarget(Contract):
    """The load a tune asks its treatments to hold: a request rate or a number of users."""

    mode: Literal["rate", "users"]
    value: UserNumber
    unit: str


class TuneFactor(Contract):
    """A setting the tune varies and the levels it tries, as the user wrote them."""

    name: str
    levels: list[str]


class TuneBracket(Contract):
    """A screening search's bracket of the max load: [highest pass, lowest fail];
    ``upper`` null when no load failed."""

    lower: Number = None
    upper: Number = None


class TuneCapacity(Contract):
    """The highest load under every SLO found by the full max-load search, with
    its interval [highest pass, lowest fail] and the SLO that stopped it."""

    value: Number = None
    lower: Number = None
    upper: Number = None
    unit: str
    confirmed: bool
    limiting_slo: str | None = None


class TuneThroughput(Contract):
    """Output tokens per second at the capacity (the confirmation trial's), in
    all, per GPU and per user (per concurrent request)."""

    output_tokens_per_s: Number = None
    per_gpu: Number = None
    per_user: Number = None


class TuneTreatment(Contract):
    """One combination of the factors' levels and what the tune found for it.

    ``status``: measured (full search ran), pruned (its screening bracket lay
    below the best's, ``pruned_reason`` says so), failed (the engine did not
    start or crashed, ``error`` and ``log_tail`` say how) or pending (not reached:
    the tune stopped first). ``sweep`` and ``report`` are relative to the tune's
    folder; ``vs_current`` compares the capacity interval with the current
    settings' (noise: the intervals overlap). ``engine_time_s``: its engines'
    start to stop, summed; ``full_search_s``: the full search's part of it, which
    ran ``full_trials`` trials."""

    name: str
    settings: dict[str, str]
    status: Literal["measured", "pruned", "failed", "pending"]
    current: bool = False
    startup_s: Number = None
    peak_memory_bytes: int | None = None
    engine_time_s: float = 0.0
    full_search_s: Number = None
    full_trials: int | None = None
    error: str | None = None
    log_tail: str = ""
    screening: TuneBracket | None = None
    capacity: TuneCapacity | None = None
    throughput: TuneThroughput | None = None
    meets_target: bool | None = None
    pruned_reason: str | None = None
    sweep: str | None = None
    report: str | None = None
    rank: int | None = None
    pareto: bool = False
    vs_current: Literal["better", "worse", "noise"] | None = None


class TuneCurrent(Contract):
    """The settings the engine runs today and the treatment that measures them."""

    settings: dict[str, str]
    treatment: str


class TuneRunnerUp(Contract):
    """The next best treatment, and whether the recommendation held a load it
    failed (better) or the two cannot be told apart (noise)."""

    treatment: str
    comparison: Literal["better", "noise"]


class TuneRecommendation(Contract):
    """The best treatment by capacity at the SLO (ties: the Pareto front of
    throughput per GPU against per user) and how to launch it."""

    treatment: str
    settings: dict[str, str]
    command_line: str
    yaml: str
    runner_up: TuneRunnerUp | None = None


class TuneSearch(Contract):
    """How each treatment was measured: screening trials' length and tolerance,
    then the full search's."""

    screen_duration_s: float
    screen_tolerance: float
    duration_s: float
    tolerance: float
    prune: bool


class Tune(Contract):
    """tune.json: an engine restarted per treatment of its settings, each
    treatment's capacity under the scenario's SLOs, the verdict against the
    current settings and the recommended settings."""

    schema_: TuneSchema = Field(alias="schema")
    scenario: str
    engine: str
    command: str
    started_at: str
    ended_at: str | None = None
    finished: bool
    target: TuneTarget
    factors: list[TuneFactor]
    linked: list[list[str]] = Field(default_factory=list)
    exclusions: list[dict[str, str]] = Field(default_factory=list)
    search: TuneSearch
    current: TuneCurrent
    treatments: list[TuneTreatment]
    recommended: TuneRecommendation | None = None
    verdict: Literal["pass", "fail", "invalid"]
    exit_code: int
    headline: str
    engine_time_s: float
    full_grid_engine_time_s: Number = None


class RunMeta(Contract):
    """The saved run's metadata: what the verdict is derived from again."""

    run_id: str | None = None
    started_at: str | None = None
    measured_s: Number = None
    complete: bool | None = None
    scenarios: dict[str, dict[str, Any]] = Field(default_factory=dict)
    generator: dict[str, Any] | None = None
    baseline: str | None = None


class RunFile(Contract):
    """data/run.json: the run's metadata, its time series rows (each
    endpoint's and replica's apart, keyed ``endpoint`` or ``replica``) and the
    engine's scraped metrics (the histograms lie beside it, in buckets.json)."""

    schema_: RundataSchema = Field(alias="schema")
    meta: RunMeta
    timeseries: list[dict[str, Any]] = Field(default_factory=list)
    timeseries_apart: list[dict[str, Any]] = Field(default_factory=list)
    server_metrics: list[dict[str, Any]] = Field(default_factory=list)


DOCUMENTS: dict[str, type[Contract]] = {
    "summary": Summary,
    "sweep": Sweep,
    "experiment": Experiment,
    "repeats": Repeats,
    "run-data": RunFile,
    "tune": Tune,
}


T = TypeVar("T", bound=Contract)


class ContractError(ValueError):
    """A document that does not hold to its contract; the message names the fields."""


def parse(model: type[T], data: Any, where: str) -> T:
    """``data`` as ``model``, or a ContractError naming each bad field and why."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ContractError(
            f"{where}: not a {model.__name__.lower()} document: {problems}"
        ) from None


def as_model(model: type[T], data: T | Any, where: str) -> T:
    """``data`` when it already is a ``model``; else parsed as one (a document as
    written, such as summary.json's dict), so a reader takes either."""
    return data if isinstance(data, model) else parse(model, data, where)


def read_document(model: type[T], file: Path) -> T:
    """``file`` parsed as ``model``; ContractError naming the file and the bad fields."""
    try:
        raw = read_bounded(file, MAX_DOCUMENT_BYTES)
    except ValueError as exc:
        raise ContractError(str(exc)) from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ContractError(f"{file}: not JSON: {exc}") from None
    return parse(model, data, str(file))


def json_schema(name: str) -> dict[str, Any]:
    """The published JSON Schema of the document called ``name``."""
    try:
        model = DOCUMENTS[name]
    except KeyError:
        known = ", ".join(DOCUMENTS)
        raise ValueError(f"no document called {name!r}: expected one of {known}") from None
    return model.model_json_schema(by_alias=True)
