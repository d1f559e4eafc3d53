"""The metrics a run measures per request, each named once: its histogram, SLO key, unit and label.

Every list of metric names in slogate is drawn from this table: the keys a
scenario's ``slo`` block accepts, the groups the judge treats alike, what the
summary details, what compare gates on, the charts' and the report's labels,
the web view's columns. A new metric the client already records is one entry
here and its line in docs/reports.md. The table lives in ``scenarios/``, the
first room, because the scenario schema is its first reader: every later room
may import it, none has to reach back (docs/design.md, "Metric catalogue").
"""

from __future__ import annotations

from dataclasses import dataclass

# Groups: what a metric is, so each reader picks its metrics by meaning.
LATENCY = "latency"  # a request's own latency, which the generator's delays can bend
GAP = "gap"  # made of gaps between chunks: a read that takes two chunks bends it
ANSWER = "answer"  # the answer's own, apart from reasoning: equal to its twin without it
SESSION = "session"  # an agent session's, shown in the summary's sessions block
ENGINE = "engine"  # the engine reports its own (``analysis/engine_side/engine_view.py``)
WAIT = "wait"  # a request waiting for the engine (queue, prefill) raises it
DECODE = "decode"  # slow decoding raises it
LAG = "lag"  # the load generator's own lateness, never an SLO
SPLIT = "split"  # a part of TTFT as the engine's own timings split it, not an SLO
MS = "ms"


@dataclass(frozen=True, slots=True)
class Metric:
    """One measured metric. ``name`` is its histogram's; ``key`` is how SLOs,
    summary.json and the reports name it (``ttft_ms``; a count keeps its
    name). Latencies are kept in microseconds and shown in ms; counts as they are."""

    name: str
    label: str
    unit: str = MS
    groups: frozenset[str] = frozenset()
    headline: bool = False  # in every window, stage and live view
    gated: bool = False  # ``slogate compare`` and ``--baseline`` gate on its p95/p99
    goodput: bool = False  # a per-request limit of the goodput block

    @property
    def key(self) -> str:
        return f"{self.name}_ms" if self.unit == MS else self.name

    @property
    def slo(self) -> bool:
        """A scenario may set an SLO on it: every metric but the generator's lag
        and TTFT's parts."""
        return not self.groups & {LAG, SPLIT}


def _m(name: str, label: str, *groups: str, unit: str = MS, **flags: bool) -> Metric:
    return Metric(name, label, unit, frozenset(groups), **flags)


# The order is the summary's and the report's.
TTFT = _m("ttft", "TTFT from send", LATENCY, ENGINE, WAIT, headline=True, gated=True, goodput=True)
ITL = _m("itl", "ITL", LATENCY, GAP, ENGINE, DECODE, headline=True, gated=True)
TPOT = _m("tpot", "TPOT", LATENCY, DECODE, headline=True, gated=True, goodput=True)
E2E = _m("e2e", "E2E from send", LATENCY, WAIT, DECODE, headline=True, gated=True, goodput=True)
TTFA = _m("ttfa", "TTFA (first answer token)", ANSWER, goodput=True)
REASONING = _m("reasoning", "reasoning time", ANSWER)
ANSWER_ITL = _m("answer_itl", "ITL, answer", ANSWER)
ANSWER_TPOT = _m("answer_tpot", "TPOT, answer", ANSWER)
TTFTC = _m("ttftc", "time to first tool-call token")
SESSION_WALL = _m("session", "agent session, to the final answer")
TTFT_SCHED = _m("ttft_sched", "TTFT from schedule", LATENCY, WAIT, gated=True)
E2E_SCHED = _m("e2e_sched", "E2E from schedule", LATENCY, WAIT, gated=True)
CHUNK_GAP = _m("chunk_gap", "chunk gap", LATENCY, GAP)
MAX_STALL = _m("max_stall", "max stall per request", LATENCY, GAP)
GENERATOR_LAG = _m("lag", "generator lag", LAG)
# the generator's lag split by cause: five parts that sum to it
LAG_PREPARE = _m("lag_prepare", "generator lag: prepared late", LAG)
LAG_CAP = _m("lag_cap", "generator lag: held by the in-flight cap (the engine's queue)", LAG)
LAG_DISPATCH = _m("lag_dispatch", "generator lag: dispatcher late", LAG)
LAG_CONNECT = _m("lag_connect", "generator lag: connect", LAG)
LAG_WRITE = _m("lag_write", "generator lag: write", LAG)
LAG_PARTS = (LAG_PREPARE, LAG_CAP, LAG_DISPATCH, LAG_CONNECT, LAG_WRITE)
# TTFT taken apart by the engine's own timings: outside it, in its queue, in its prefill
TTFT_OUTSIDE = _m(
    "ttft_outside", "TTFT outside the engine (network, HTTP, front end, uncounted waits)", SPLIT
)
TTFT_QUEUE = _m("ttft_queue", "TTFT in the engine's queue", SPLIT)
TTFT_PREFILL = _m("ttft_prefill", "TTFT in the engine's prefill", SPLIT)
TTFT_SPLIT = (TTFT_OUTSIDE, TTFT_QUEUE, TTFT_PREFILL)
SESSION_ENGINE = _m("session_engine", "agent session: time on the engine", SESSION)
SESSION_TOOL = _m("session_tool", "agent session: time in tools", SESSION)
# TTFT in the fixed context bands agent sessions are judged in: upper bound in
# tokens (exclusive) and the band's label, which ends its histogram's name.
TTFT_BY_CONTEXT = "ttft_ctx_"
CONTEXT_BANDS = ((8192, "0_8k"), (32768, "8_32k"), (131072, "32_128k"), (None, "128k_up"))
TTFT_IN_BANDS = tuple(
    _m(f"{TTFT_BY_CONTEXT}{band}", f"TTFT, context {band}", SESSION) for _, band in CONTEXT_BANDS
)
REASONING_TOKENS = _m("reasoning_tokens", "reasoning tokens", unit="tokens")
ANSWER_TOKENS = _m("answer_tokens", "answer tokens", unit="tokens")
OUTPUT_TOKENS = _m("output_tokens", "output tokens", unit="tokens")
TOOL_ARG_BYTES = _m("tool_arg_bytes", "tool-call argument bytes", unit="bytes")
SESSION_STEPS = _m("session_steps", "agent session steps", SESSION, unit="steps")
SESSION_TOKENS = _m("session_tokens", "agent session tokens", SESSION, unit="tokens")

CATALOGUE: tuple[Metric, ...] = (
    TTFT,
    ITL,
    TPOT,
    E2E,
    TTFA,
    REASONING,
    ANSWER_ITL,
    ANSWER_TPOT,
    TTFTC,
    SESSION_WALL,
    TTFT_SCHED,
    E2E_SCHED,
    CHUNK_GAP,
    MAX_STALL,
    GENERATOR_LAG,
    *LAG_PARTS,
    *TTFT_SPLIT,
    SESSION_ENGINE,
    SESSION_TOOL,
    *TTFT_IN_BANDS,
    REASONING_TOKENS,
    ANSWER_TOKENS,
    OUTPUT_TOKENS,
    TOOL_ARG_BYTES,
    SESSION_STEPS,
    SESSION_TOKENS,
)
BY_NAME = {m.name: m for m in CATALOGUE}
BY_KEY = {m.key: m for m in CATALOGUE}


def names_of(group: str | None = None, **flags: bool) -> tuple[str, ...]:
    """Histogram names of the metrics in ``group`` (all when None) whose flags
    (``headline=True``, ``gated=True``, ...) all hold, in the catalogue's order."""
    return tuple(m.name for m in select(group, **flags))


def keys_of(group: str | None = None, **flags: bool) -> tuple[str, ...]:
    """SLO keys (``ttft_ms``) of the same selection as :func:`names_of`."""
    return tuple(m.key for m in select(group, **flags))


def select(group: str | None = None, **flags: bool) -> tuple[Metric, ...]:
    return tuple(
        m
        for m in CATALOGUE
        if (group is None or group in m.groups)
        and all(getattr(m, flag) == wanted for flag, wanted in flags.items())
    )


# The run's own SLOs beside the per-request metrics: shares and rates of all its requests.
ERROR_RATE = "error_rate"
GOODPUT = "goodput"
# speculative decoding: the share of draft tokens the engine accepted
ACCEPTANCE = "spec_acceptance_rate"
# structured outputs: the share of constrained answers that met their schema
SCHEMA_VALIDITY = "schema_validity"
THROUGHPUT_SLOS = ("requests_per_s", "output_tokens_per_s", "input_tokens_per_s")

# The lists every room reads.
HEADLINE = names_of(headline=True)
SLO_KEYS = keys_of(slo=True)
GOODPUT_LIMITS = keys_of(goodput=True)
LABELS = {m.key: m.label for m in CATALOGUE}
