"""Accumulates finished requests into mergeable histograms and counters.

The load side hands every finished :class:`RequestRecord` to a ``Recorder``;
nothing per request is kept, so memory stays flat however long the run. A
recorder's content can be drained into a plain payload (encoded histograms and
counters) and absorbed by another recorder: that is how Locust workers ship
their data to the master, and how the master's totals come out exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slogate.analysis.measurement.bands import context_band, tpot_band, ttft_band
from slogate.analysis.measurement.histograms import Batch, HistogramSet
from slogate.analysis.measurement.records import RequestRecord, SessionRecord, reported_cached
from slogate.analysis.measurement.request_metrics import (
    AnswerMetrics,
    RequestMetrics,
    request_metrics,
)
from slogate.analysis.measurement.timelines import Timelines
from slogate.scenarios.metrics import (
    ANSWER_ITL,
    ANSWER_TOKENS,
    ANSWER_TPOT,
    CHUNK_GAP,
    E2E,
    E2E_SCHED,
    GENERATOR_LAG,
    ITL,
    MAX_STALL,
    OUTPUT_TOKENS,
    REASONING,
    REASONING_TOKENS,
    SESSION_ENGINE,
    SESSION_STEPS,
    SESSION_TOKENS,
    SESSION_TOOL,
    SESSION_WALL,
    TOOL_ARG_BYTES,
    TPOT,
    TTFA,
    TTFT,
    TTFT_SCHED,
    TTFTC,
)

ERROR_SAMPLES_PER_KIND = 5
ERROR_SAMPLE_CHARS = 500
MAX_TURN_BUCKET = 20
OVERALL = "all"
HEAD = "head:"  # ``--warmup auto``: the first half of the run, by segment, until the cut
PROBE = "probe"  # ``--probes``: requests sent beside the load, in no bucket of its own
SESSION_CACHE_HIT = "session_cache_hit"  # per mille, one sample per conversation
# structured outputs: a constrained request's TTFT by its schema, new or seen
SCHEMA_FIRST = "ttft_schema_first"
SCHEMA_CACHED = "ttft_schema_cached"
K = TypeVar("K")
W = TypeVar("W", tuple[str, int], tuple[str, str, int])  # a window's key: its index last


@dataclass(frozen=True, slots=True)
class GoodputLimits:
    """Per-request limits a request must all meet to count as good (DistServe)."""

    ttft_ms: float | None = None
    ttfa_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    itl_max_ms: float | None = None

    def met_by(self, m: RequestMetrics) -> bool:
        checks = (
            (self.ttft_ms, m.ttft_ns),
            (self.ttfa_ms, m.answer.ttfa_ns),
            (self.tpot_ms, m.tpot_ns),
            (self.e2e_ms, m.e2e_ns),
            (self.itl_max_ms, m.max_stall_ns),
        )
        return all(
            limit is None or value is None or value <= limit * 1e6 for limit, value in checks
        )


# what a server answers when it sheds load rather than queue it: rate limited,
# or overloaded (llm-d's flow control, a gateway's admission)
SHED_STATUSES = (429, 503)


@dataclass(slots=True)
class Counters:
    """Additive counts of one scenario (or one stage of it)."""

    ok: int = 0
    failed: int = 0
    cancelled: int = 0  # by the client, as the scenario planned: neither ok nor failed
    good: int = 0
    good_output_tokens: int = 0  # of the requests within every per-request limit
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, list[str]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    intended_input_tokens: int = 0
    intended_output_tokens: int = 0
    count_methods: Counter[str] = field(default_factory=Counter)
    chunk_token_methods: Counter[str] = field(default_factory=Counter)
    # requests by the response header that named their replica (behind a router)
    served_by_headers: Counter[str] = field(default_factory=Counter)
    # requests the server shed (HTTP 429 or 503), by status: per traffic class
    sheds: Counter[str] = field(default_factory=Counter)
    # gaps between output chunks, and those of 0: chunks timed by one read,
    # and of those the ones read while the generator's loop was held
    chunk_gaps: int = 0
    same_read_gaps: int = 0
    same_read_stalled_gaps: int = 0
    # reasoning models: requests whose stream carried reasoning, and the split
    reasoning_requests: int = 0
    reasoning_tokens: int = 0
    answer_tokens: int = 0
    # tool calls: requests whose reply called tools, and the calls
    tool_call_requests: int = 0
    tool_calls: int = 0
    # prefix cache: requests whose reply said how many prompt tokens were cached,
    # the prompt tokens cached, the requests with a hit (cached_tokens > 0),
    cache_reported: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0
    # speculative decoding: requests whose reply said what was drafted for it,
    # the draft tokens verified and those accepted
    spec_reported: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    # structured outputs: successful requests sent with a response_format, those
    # whose schema was new to their load process, those whose answer broke it
    # (and a few of them, named)
    constrained: int = 0
    schema_first: int = 0
    schema_invalid: int = 0
    schema_invalid_samples: list[str] = field(default_factory=list)
    # agent sessions: finished with an answer, cut at the step limit, failed
    sessions: int = 0
    sessions_unfinished: int = 0
    sessions_failed: int = 0
    first_end_s: float | None = None
    last_end_s: float | None = None

    @property
    def total(self) -> int:
        return self.ok + self.failed

    def note_end(self, wall_s: float) -> None:
        if self.first_end_s is None or wall_s < self.first_end_s:
            self.first_end_s = wall_s
        if self.last_end_s is None or wall_s > self.last_end_s:
            self.last_end_s = wall_s

    def note_error(self, kind: str, message: str) -> None:
        self.failed += 1
        self.errors[kind] += 1
        samples = self.error_samples.setdefault(kind, [])
        if len(samples) < ERROR_SAMPLES_PER_KIND:
            samples.append(message[:ERROR_SAMPLE_CHARS])

    def add(self, other: Counters) -> None:
        self.ok += other.ok
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.good += other.good
        self.good_output_tokens += other.good_output_tokens
        self.errors.update(other.errors)
        for kind, samples in other.error_samples.items():
            mine = self.error_samples.setdefault(kind, [])
            mine.extend(samples[: ERROR_SAMPLES_PER_KIND - len(mine)])
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.intended_input_tokens += other.intended_input_tokens
        self.intended_output_tokens += other.intended_output_tokens
        self.count_methods.update(other.count_methods)
        self.chunk_token_methods.update(other.chunk_token_methods)
        self.served_by_headers.update(other.served_by_headers)
        self.sheds.update(other.sheds)
        self.chunk_gaps += other.chunk_gaps
        self.same_read_gaps += other.same_read_gaps
        self.same_read_stalled_gaps += other.same_read_stalled_gaps
        self.reasoning_requests += other.reasoning_requests
        self.reasoning_tokens += other.reasoning_tokens
        self.answer_tokens += other.answer_tokens
        self.tool_call_requests += other.tool_call_requests
        self.tool_calls += other.tool_calls
        self.cache_reported += other.cache_reported
        self.cached_tokens += other.cached_tokens
        self.cache_hits += other.cache_hits
        self.spec_reported += other.spec_reported
        self.draft_tokens += other.draft_tokens
        self.accepted_tokens += other.accepted_tokens
        self.constrained += other.constrained
        self.schema_first += other.schema_first
        self.schema_invalid += other.schema_invalid
        room = ERROR_SAMPLES_PER_KIND - len(self.schema_invalid_samples)
        self.schema_invalid_samples.extend(other.schema_invalid_samples[:room])
        self.sessions += other.sessions
        self.sessions_unfinished += other.sessions_unfinished
        self.sessions_failed += other.sessions_failed
        for instant in (other.first_end_s, other.last_end_s):
            if instant is not None:
                self.note_end(instant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "good": self.good,
            "good_output_tokens": self.good_output_tokens,
            "errors": dict(self.errors),
            "error_samples": self.error_samples,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "intended_input_tokens": self.intended_input_tokens,
            "intended_output_tokens": self.intended_output_tokens,
            "count_methods": dict(self.count_methods),
            "chunk_token_methods": dict(self.chunk_token_methods),
            "served_by_headers": dict(self.served_by_headers),
            "sheds": dict(self.sheds),
            "chunk_gaps": self.chunk_gaps,
            "same_read_gaps": self.same_read_gaps,
            "same_read_stalled_gaps": self.same_read_stalled_gaps,
            "reasoning_requests": self.reasoning_requests,
            "reasoning_tokens": self.reasoning_tokens,
            "answer_tokens": self.answer_tokens,
            "tool_call_requests": self.tool_call_requests,
            "tool_calls": self.tool_calls,
            "cache_reported": self.cache_reported,
            "cached_tokens": self.cached_tokens,
            "cache_hits": self.cache_hits,
            "spec_reported": self.spec_reported,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "constrained": self.constrained,
            "schema_first": self.schema_first,
            "schema_invalid": self.schema_invalid,
            "schema_invalid_samples": self.schema_invalid_samples,
            "sessions": self.sessions,
            "sessions_unfinished": self.sessions_unfinished,
            "sessions_failed": self.sessions_failed,
            "first_end_s": self.first_end_s,
            "last_end_s": self.last_end_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Counters:
        counters = cls(**{k: v for k, v in data.items() if k not in _COUNTER_FIELDS})
        for key in _COUNTER_FIELDS:
            setattr(counters, key, Counter(data.get(key, {})))
        return counters


_COUNTER_FIELDS = ("errors", "count_methods", "chunk_token_methods", "served_by_headers", "sheds")


@dataclass(slots=True)
class Bucket:
    """Histograms and counters of one scenario over one span (the run or a stage)."""

    histograms: HistogramSet = field(default_factory=HistogramSet)
    counters: Counters = field(default_factory=Counters)

    def add(self, other: Bucket) -> None:
        """Merge exactly; a side that never reasoned has no answer histograms of
        its own, so its headline twins stand in for them (see ANSWER_TWINS)."""
        mine = self.counters.reasoning_requests > 0
        theirs = other.counters.reasoning_requests > 0
        if theirs and not mine:
            self.histograms.add_as(self.histograms, ANSWER_TWINS)
        if mine and not theirs:
            self.histograms.add_as(other.histograms, ANSWER_TWINS)
        self.histograms.add(other.histograms)
        self.counters.add(other.counters)

    def encode(self) -> dict[str, Any]:
        return {"histograms": self.histograms.encode(), "counters": self.counters.to_dict()}

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Bucket:
        return cls(HistogramSet.decode(data["histograms"]), Counters.from_dict(data["counters"]))


def count_into(counters: Counters, record: RequestRecord, m: RequestMetrics, good: bool) -> None:
    """Add one finished request to the counts. Failed requests count, never
    time; cancelled ones are counted apart, outside errors and goodput."""
    if record.cancelled:
        counters.cancelled += 1
        return
    if record.served_by_header is not None:
        counters.served_by_headers[record.served_by_header] += 1
    if record.http_status in SHED_STATUSES:
        counters.sheds[str(record.http_status)] += 1
    if record.error is not None:  # not ok: cancelled ones returned above
        counters.note_error(record.error.value, record.error_message)
        return
    counters.ok += 1
    counters.good += good
    counters.good_output_tokens += m.output_tokens if good else 0
    counters.output_tokens += m.output_tokens
    counters.input_tokens += record.input_tokens or 0
    counters.intended_input_tokens += record.intended_input_tokens or 0
    counters.intended_output_tokens += record.intended_output_tokens or 0
    counters.count_methods[m.count_method.value] += 1
    counters.chunk_token_methods[m.chunk_token_method.value] += 1
    counters.chunk_gaps += len(m.chunk_gaps_ns)
    counters.same_read_gaps += m.chunk_gaps_ns.count(0)
    counters.same_read_stalled_gaps += record.stalled_same_reads
    answer = m.answer
    counters.reasoning_requests += answer.split
    counters.reasoning_tokens += answer.reasoning_tokens
    counters.answer_tokens += answer.answer_tokens
    counters.tool_call_requests += record.tool_calls > 0
    counters.tool_calls += record.tool_calls
    cached = reported_cached(record)
    if cached is not None:
        counters.cache_reported += 1
        counters.cache_hits += cached > 0
        counters.cached_tokens += cached
    if record.draft_tokens is not None and record.accepted_tokens is not None:
        counters.spec_reported += 1
        counters.draft_tokens += record.draft_tokens
        counters.accepted_tokens += record.accepted_tokens
    if record.constrained:
        count_constrained(counters, record)


def count_constrained(counters: Counters, record: RequestRecord) -> None:
    """A successful constrained request: counted, and when its answer broke its
    schema, named with the reason (a few per bucket)."""
    counters.constrained += 1
    counters.schema_first += record.schema_first
    if record.schema_error is None:
        return
    counters.schema_invalid += 1
    if len(counters.schema_invalid_samples) < ERROR_SAMPLES_PER_KIND:
        where = f"conversation {record.conversation} turn {record.turn}"
        counters.schema_invalid_samples.append(
            f"{where}: {record.schema_error}"[:ERROR_SAMPLE_CHARS]
        )


def record_constraint(hist: HistogramSet, record: RequestRecord, m: RequestMetrics) -> None:
    """A request of a scenario with structured outputs: its TTFT and TPOT kept
    apart by constrained or not, and a constrained one's TTFT by whether its
    schema was new (the engine compiled a grammar) or seen before (cached).
    A scenario without structured outputs records nothing here."""
    if record.constrained is None:
        return
    kind = "constrained" if record.constrained else "unconstrained"
    if m.ttft_ns is not None:
        hist.record_ns(f"{TTFT.name}_{kind}", m.ttft_ns)
        if record.constrained:
            hist.record_ns(SCHEMA_FIRST if record.schema_first else SCHEMA_CACHED, m.ttft_ns)
    if m.tpot_ns is not None:
        hist.record_ns(f"{TPOT.name}_{kind}", m.tpot_ns)


def cache_hit(record: RequestRecord) -> bool:
    """A prefix-cache hit: the server said it served part of the prompt from
    its cache (cached_tokens > 0). A reply that did not say is a miss: vLLM
    releases before 0.32 leave the field out when nothing was cached."""
    return bool(reported_cached(record))


# The answer's histograms and their headline twins: equal for a request that did
# not reason. A bucket keeps the answer's own only from its first request that
# reasoned on, filled then with the twins of the requests before it (and merges
# do the same), so plain streams pay nothing and every answer histogram still
# covers every request.
ANSWER_TWINS = {
    TTFA.name: TTFT.name,
    ANSWER_ITL.name: ITL.name,
    ANSWER_TPOT.name: TPOT.name,
    ANSWER_TOKENS.name: OUTPUT_TOKENS.name,
}


@dataclass(frozen=True, slots=True)
class Gaps:
    """A request's per-token ITL, its answer's, and its chunk gaps, as batches
    built once: every bucket and window the request goes to records them for
    a reference each, so keeping it apart by endpoint and replica adds no
    per-token work (bench/bench_apart.py)."""

    itl: Batch
    answer_itl: Batch
    chunk: Batch

    @classmethod
    def of(cls, m: RequestMetrics) -> Gaps:
        itl = _itl_batch(m.itl_ns)
        answer = itl if m.answer.itl_ns is m.itl_ns else _itl_batch(m.answer.itl_ns)
        return cls(itl, answer, Batch.of_ns(m.chunk_gaps_ns))


def _itl_batch(itl_ns: Sequence[tuple[float, int]]) -> Batch:
    """Each chunk's per-token gap, weighted by its tokens."""
    if not itl_ns:
        return Batch.of_ns(())
    gaps, tokens = zip(*itl_ns, strict=True)
    return Batch.of_ns(gaps, tokens)


def record_answer(hist: HistogramSet, answer: AnswerMetrics, itl: Batch) -> None:
    """The answer's own latencies (``itl``: its per-token ITL) and the
    reasoning/answer token split."""
    if answer.ttfa_ns is not None:
        hist.record_ns(TTFA.name, answer.ttfa_ns)
    if answer.reasoning_ns is not None:
        hist.record_ns(REASONING.name, answer.reasoning_ns)
    if answer.tpot_ns is not None:
        hist.record_ns(ANSWER_TPOT.name, answer.tpot_ns)
    hist.record_batch(ANSWER_ITL.name, itl)
    if answer.reasoning_tokens:
        hist.record_us(REASONING_TOKENS.name, answer.reasoning_tokens)
    if answer.answer_tokens:
        hist.record_us(ANSWER_TOKENS.name, answer.answer_tokens)


def record_headline(hist: HistogramSet, m: RequestMetrics, gaps: Gaps) -> None:
    """E2E, TTFT, TPOT and per-token ITL: what every bucket and window keeps."""
    hist.record_ns(E2E.name, m.e2e_ns)
    if m.ttft_ns is not None:
        hist.record_ns(TTFT.name, m.ttft_ns)
    if m.tpot_ns is not None:
        hist.record_ns(TPOT.name, m.tpot_ns)
    hist.record_batch(ITL.name, gaps.itl)


def record_window(
    bucket: Bucket, record: RequestRecord, m: RequestMetrics, good: bool, gaps: Gaps
) -> None:
    """A time window keeps only the headline latencies: it lives a few seconds.
    Open loop, TTFT from the schedule too: the saturation check's signal when
    a queue waits at the in-flight cap (``slogate.analysis.verdict.saturation``)."""
    count_into(bucket.counters, record, m, good)
    if record.ok:
        record_headline(bucket.histograms, m, gaps)
        if m.ttft_sched_ns is not None:
            bucket.histograms.record_ns(TTFT_SCHED.name, m.ttft_sched_ns)


def record_parts(hist: HistogramSet, m: RequestMetrics) -> None:
    """The parts a request's lag and its TTFT split into, where known."""
    for parts in (m.lag_parts, m.ttft_split):
        if parts is not None:
            for name, value in parts.items():
                hist.record_ns(name, value)


def record_into(
    bucket: Bucket, record: RequestRecord, m: RequestMetrics, good: bool, gaps: Gaps
) -> None:
    """Add one finished request to a bucket, with every metric's histogram."""
    hist = bucket.histograms
    split_before = bucket.counters.reasoning_requests > 0
    count_into(bucket.counters, record, m, good)
    if not record.ok:
        return
    if m.answer.split and not split_before:
        hist.add_as(hist, ANSWER_TWINS)
    record_headline(hist, m, gaps)
    if m.answer.split or split_before:
        record_answer(hist, m.answer, gaps.answer_itl)
    if m.ttft_ns is not None:
        hist.record_ns(f"ttft_turn_{min(record.turn + 1, MAX_TURN_BUCKET)}", m.ttft_ns)
        hist.record_ns("ttft_cache_hit" if cache_hit(record) else "ttft_cache_miss", m.ttft_ns)
    record_constraint(hist, record, m)
    if record.input_tokens:
        if m.ttft_ns is not None:
            hist.record_ns(ttft_band(record.input_tokens), m.ttft_ns)
            hist.record_ns(context_band(record.input_tokens), m.ttft_ns)
        if m.tpot_ns is not None:
            hist.record_ns(tpot_band(record.input_tokens + m.output_tokens), m.tpot_ns)
    if m.max_stall_ns is not None:
        hist.record_ns(MAX_STALL.name, m.max_stall_ns)
    hist.record_batch(CHUNK_GAP.name, gaps.chunk)
    scheduled = (
        (TTFT_SCHED.name, m.ttft_sched_ns),
        (E2E_SCHED.name, m.e2e_sched_ns),
        (GENERATOR_LAG.name, m.lag_ns),
    )
    for name, value in scheduled:
        if value is not None:
            hist.record_ns(name, value)
    record_parts(hist, m)
    hist.record_us(OUTPUT_TOKENS.name, m.output_tokens)
    if record.inputs:
        hist.record_us("inputs", record.inputs)
    if m.ttftc_ns is not None:
        hist.record_ns(TTFTC.name, m.ttftc_ns)
        hist.record_us(TOOL_ARG_BYTES.name, record.tool_arg_bytes)
    lengths = (
        ("input_tokens", record.input_tokens),
        ("intended_output_tokens", record.intended_output_tokens),
        ("intended_input_tokens", record.intended_input_tokens),
    )
    for name, tokens in lengths:
        if tokens is not None:
            hist.record_us(name, tokens)


ENDPOINT = "endpoint:"
REPLICA = "replica:"
# Replicas kept apart, each in a row of its own: a router that names a new
# replica in every reply would otherwise grow a bucket per reply (4.5 MB each,
# issue 42 N2); the replicas named after the first MAX_REPLICAS share one row.
MAX_REPLICAS = 32
OTHER_REPLICAS = "(others)"


def apart(record: RequestRecord) -> list[str]:
    """The spans that keep a measured request apart by where it went: the
    endpoint the client sent it to and the replica that served it, when
    known. Each request is in one of each, so the rows add up to the run's."""
    spans = []
    if record.endpoint is not None:
        spans.append(ENDPOINT + record.endpoint)
    if record.served_by is not None:
        spans.append(REPLICA + record.served_by)
    return spans


class Recorder:
    """Buckets by scenario: the measured run (``all``), each stage, each time
    window, and the probes sent beside the load (``probe``).

    Requests that end during warm-up go to the stage buckets only, so verdicts
    (computed on ``all``) exclude them. A measured request also goes to its
    endpoint's and its replica's bucket (:func:`apart`). Time windows are keyed by the index of
    the ``window_s``-long slice of wall time since ``origin_s`` in which the
    request ended; wall time because workers in other processes share it. A
    request also goes to its endpoint's and its replica's window
    (``apart_windows``, keyed by scenario, span and index), warm-up included as
    in the scenario's, so in each window those add up to the scenario's.
    """

    def __init__(
        self, goodput: dict[str, GoodputLimits] | None = None, window_s: float = 5.0
    ) -> None:
        self.goodput = goodput or {}
        self.window_s = window_s
        self.origin_s: float | None = None
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.windows: dict[tuple[str, int], Bucket] = {}
        self.apart_windows: dict[tuple[str, str, int], Bucket] = {}
        self.timelines = Timelines()
        self.replicas: set[str] = set()  # the replica spans kept apart, across drains

    def kept(self, span: str) -> str:
        """``span`` itself, but for a replica named after MAX_REPLICAS others:
        the one row the rest are folded into, so the rows still add up."""
        if not span.startswith(REPLICA) or span in self.replicas:
            return span
        if len(self.replicas) < MAX_REPLICAS:
            self.replicas.add(span)
            return span
        return REPLICA + OTHER_REPLICAS

    def bucket(self, scenario: str, span: str) -> Bucket:
        return _found(self.buckets, (scenario, span))

    def window(self, scenario: str, index: int) -> Bucket:
        return _found(self.windows, (scenario, index))

    def apart_window(self, scenario: str, span: str, index: int) -> Bucket:
        return _found(self.apart_windows, (scenario, span, index))

    def record(
        self,
        record: RequestRecord,
        wall_s: float,
        stage: str | None = None,
        warmup: bool = False,
        head: int | None = None,
    ) -> RequestMetrics:
        m = request_metrics(record)
        limits = self.goodput.get(record.scenario)
        good = record.ok and (limits is None or limits.met_by(m))
        gaps = Gaps.of(m)
        targets = self._targets(record.scenario, stage, warmup, head, apart(record))
        for bucket in targets:
            record_into(bucket, record, m, good, gaps)
            bucket.counters.note_end(wall_s)
        if self.origin_s is not None:
            index = max(int((wall_s - self.origin_s) // self.window_s), 0)
            record_window(self.window(record.scenario, index), record, m, good, gaps)
            for span in apart(record):
                window = self.apart_window(record.scenario, self.kept(span), index)
                record_window(window, record, m, good, gaps)
        self.timelines.add(record, m, wall_s, warmup)
        return m

    def record_cut_off(self, record: RequestRecord, wall_s: float, warmup: bool) -> None:
        """A request the run's end cut off after it was sent: into the
        timelines alone, flagged, so no latency, count or window holds it (the
        run counts it as cancelled at the stop)."""
        self.timelines.add_cut_off(record, request_metrics(record), wall_s, warmup)

    def record_probe(self, record: RequestRecord, wall_s: float) -> None:
        """A probe (``--probes``): into its scenario's probe bucket alone, never
        the scenario's own buckets, windows or timelines."""
        bucket = self.bucket(record.scenario, PROBE)
        m = request_metrics(record)
        record_into(bucket, record, m, record.ok, Gaps.of(m))
        bucket.counters.note_end(wall_s)

    def record_session(
        self,
        scenario: str,
        session: SessionRecord,
        stage: str | None = None,
        warmup: bool = False,
        head: int | None = None,
        spans: Sequence[str] = (),
    ) -> None:
        """One agent session, into the buckets a request ending now would go to
        (``spans``: where its last request went, :func:`apart`): the steps it
        took and, when it ended with an answer, the time to it."""
        for bucket in self._targets(scenario, stage, warmup, head, spans):
            c = bucket.counters
            c.sessions += 1
            c.sessions_failed += session.outcome == "failed"
            c.sessions_unfinished += session.outcome == "unfinished"
            bucket.histograms.record_us(SESSION_STEPS.name, session.steps)
            if session.outcome == "answered":
                bucket.histograms.record_ns(SESSION_WALL.name, session.end_ns - session.start_ns)
                if session.engine_ns is not None:
                    bucket.histograms.record_ns(SESSION_ENGINE.name, session.engine_ns)
                if session.tool_ns is not None:
                    bucket.histograms.record_ns(SESSION_TOOL.name, session.tool_ns)
                if session.tokens:
                    bucket.histograms.record_us(SESSION_TOKENS.name, session.tokens)

    def record_conversation_cache(
        self,
        scenario: str,
        cached_tokens: int,
        prompt_tokens: int,
        stage: str | None = None,
        warmup: bool = False,
        head: int | None = None,
        spans: Sequence[str] = (),
    ) -> None:
        """One conversation's prefix-cache hit rate (its cached prompt tokens over
        its prompt tokens, in per mille), into the buckets a request ending now
        would go to (``spans``: where its last request went, :func:`apart`)."""
        if prompt_tokens <= 0:
            return
        permille = round(1000 * min(cached_tokens, prompt_tokens) / prompt_tokens)
        for bucket in self._targets(scenario, stage, warmup, head, spans):
            bucket.histograms.record_us(SESSION_CACHE_HIT, permille)

    def _targets(
        self,
        scenario: str,
        stage: str | None,
        warmup: bool,
        head: int | None = None,
        spans: Sequence[str] = (),
    ) -> list[Bucket]:
        """The buckets something ending now goes to: the run's (after warm-up;
        with ``--warmup auto`` its ``head`` segment's until the cut is known),
        its stage's, and after warm-up those of its endpoint and replica
        (``spans``, :func:`apart`)."""
        run = OVERALL if head is None else f"{HEAD}{head}"
        targets = [] if warmup else [self.bucket(scenario, run)]
        if stage is not None:
            targets.append(self.bucket(scenario, f"stage:{stage}"))
        if not warmup:
            targets += [self.bucket(scenario, self.kept(span)) for span in spans]
        return targets

    def apply_cut(self, first_kept: int, cut_s: float) -> None:
        """``--warmup auto``: the head segments from ``first_kept`` on join the
        measured run; the earlier ones, the warm-up, are dropped with the rest,
        and the requests' timelines that ended before ``cut_s`` (from the
        origin) are marked warm-up."""
        if self.origin_s is not None:
            self.timelines.mark_warmup(self.origin_s + cut_s)
        for (scenario, span), bucket in list(self.buckets.items()):
            if span.startswith(HEAD):
                if int(span[len(HEAD) :]) >= first_kept:
                    self.bucket(scenario, OVERALL).add(bucket)
                del self.buckets[(scenario, span)]

    def pop_windows(self, before: int) -> dict[tuple[str, int], Bucket]:
        """Remove and return the windows whose index is below ``before``: closed ones."""
        return _pop_before(self.windows, before)

    def pop_apart_windows(self, before: int) -> dict[tuple[str, str, int], Bucket]:
        """The endpoints' and replicas' windows closed as :meth:`pop_windows`'s."""
        return _pop_before(self.apart_windows, before)

    def drain(self) -> dict[str, Any]:
        """Everything recorded so far, encoded; the recorder starts empty again."""
        payload = {
            "buckets": [[s, span, b.encode()] for (s, span), b in self.buckets.items()],
            "windows": [[s, i, b.encode()] for (s, i), b in self.windows.items()],
            "apart_windows": [[s, a, i, b.encode()] for (s, a, i), b in self.apart_windows.items()],
            "timelines": self.timelines.encode(),
        }
        self.buckets = {}
        self.windows = {}
        self.apart_windows = {}
        self.timelines = Timelines()
        return payload

    def absorb(self, payload: dict[str, Any]) -> None:
        for scenario, span, data in payload["buckets"]:
            self.bucket(scenario, self.kept(span)).add(Bucket.decode(data))
        for scenario, index, data in payload["windows"]:
            self.window(scenario, index).add(Bucket.decode(data))
        for scenario, span, index, data in payload.get("apart_windows", ()):
            self.apart_window(scenario, self.kept(span), index).add(Bucket.decode(data))
        if "timelines" in payload:
            self.timelines.extend(Timelines.decode(payload["timelines"]))


def _found(buckets: dict[K, Bucket], key: K) -> Bucket:
    """The bucket under ``key``, made empty on first use."""
    found = buckets.get(key)
    if found is None:
        found = buckets[key] = Bucket()
    return found


def _pop_before(windows: dict[W, Bucket], before: int) -> dict[W, Bucket]:
    """Remove and return the windows whose index (the key's last part) is below ``before``."""
    closed = {key: b for key, b in windows.items() if key[-1] < before}
    for key in closed:
        del windows[key]
    return closed
