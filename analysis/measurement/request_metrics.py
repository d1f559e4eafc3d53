"""Per-request latency metrics, computed from a record's raw timestamps.

Pure functions of a
:class:`~slogate.analysis.measurement.records.RequestRecord`; the definitions are
docs/design.md's measurement contract:

- TTFT: start -> first chunk that carried output.
- ITL, per token: a chunk that carries k tokens after a gap g contributes k
  samples of g/k. Tokens of the first chunk arrived with it, so they add no
  samples; a chunk that carries no token passes its gap on to the next one.
- Chunk gap: the raw gaps between output chunks; max stall is the largest.
- TPOT: (last output chunk - first output chunk) / (output tokens - 1).
- Tool calls: TTFTC is start -> first chunk carrying a tool-call delta.
- Reasoning models: TTFT stays the first output of any kind; TTFA is start ->
  first chunk that carried answer (content or a tool call, not reasoning);
  reasoning time is first reasoning chunk -> first answer chunk. ITL and TPOT
  of the answer use the answer chunks alone. Reasoning tokens are the server's
  count when it sent one, else each chunk's tokens split by its share of
  reasoning characters.
- E2E: start -> end of stream.
- Scheduled (open loop): TTFT and E2E from the scheduled instant, and the
  generator's lag (the request's bytes handed to the kernel - its scheduled
  instant), so queueing in a late generator cannot hide (coordinated
  omission). The lag splits by cause, the five parts summing to it: prepared
  late (the dispatcher waited for it to be built), held by the in-flight cap
  (the dispatcher waited for a free slot: the engine's queue), dispatcher
  late (the rest until its send started), connect (no idle connection was
  waiting) and write.
- TTFT taken apart, where the engine timed the request itself: its queue and
  its prefill (to the first token) on its own clock, and outside the engine,
  TTFT less both: the network, HTTP, the server's front end (parsing,
  tokenizing), any wait the engine's clock does not count (llama.cpp, which
  reports no queue, starts it when a slot takes the request) and the first
  token's way back to the client.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from enum import Enum

from slogate.analysis.measurement.records import CountMethod, RequestRecord
from slogate.scenarios.metrics import (
    LAG_CAP,
    LAG_CONNECT,
    LAG_DISPATCH,
    LAG_PREPARE,
    LAG_WRITE,
    TTFT_OUTSIDE,
    TTFT_PREFILL,
    TTFT_QUEUE,
)


class ChunkTokenMethod(str, Enum):
    """How each chunk's token count was known; the summary reports it for ITL."""

    EXACT = "exact"  # per-chunk usage from the server, or as many tokens as chunks
    PROPORTIONAL = "proportional"  # the total spread over chunks by text length
    ONE_PER_CHUNK = "one_per_chunk"  # no count at all: every chunk is one token


@dataclass(slots=True, frozen=True)
class RequestMetrics:
    """Latencies of one successful request, in nanoseconds."""

    ttft_ns: int | None
    e2e_ns: int
    tpot_ns: float | None
    itl_ns: list[tuple[float, int]]  # (per-token gap, number of tokens) per chunk
    chunk_gaps_ns: list[int]
    max_stall_ns: int | None
    output_tokens: int
    count_method: CountMethod
    chunk_token_method: ChunkTokenMethod
    ttft_sched_ns: int | None
    e2e_sched_ns: int | None
    lag_ns: int | None
    lag_parts: LagParts | None
    answer: AnswerMetrics
    ttftc_ns: int | None  # time to the first tool-call token (None: no tool call)
    ttft_split: TtftSplit | None  # None: no first token, or the engine did not time it


NS_PER_MS = 1_000_000


@dataclass(slots=True, frozen=True)
class TtftSplit:
    """A request's TTFT in three parts, in nanoseconds, that sum to it:
    ``outside_ns`` (before and after the engine's clock: network, HTTP, front
    end, the way back), ``queue_ns`` (None where the engine does not report
    its queue: then its queue is in ``outside_ns``) and ``prefill_ns``.
    ``outside_ns`` is negative when the engine's clock counted more than the
    client's TTFT: a disagreement of clocks, as large as their error."""

    outside_ns: int
    queue_ns: int | None
    prefill_ns: int

    def items(self) -> tuple[tuple[str, int], ...]:
        """``(histogram name, value)`` of each part the engine reported (a
        histogram records a negative outside as 0)."""
        parts = [(TTFT_OUTSIDE.name, self.outside_ns), (TTFT_PREFILL.name, self.prefill_ns)]
        if self.queue_ns is not None:
            parts.append((TTFT_QUEUE.name, self.queue_ns))
        return tuple(parts)


def ttft_split(record: RequestRecord, ttft_ns: int | None) -> TtftSplit | None:
    """TTFT less the engine's own queue and prefill times (None without a
    first token or without the engine's prefill time)."""
    if ttft_ns is None or record.engine_prefill_ms is None:
        return None
    prefill = round(record.engine_prefill_ms * NS_PER_MS)
    queue = None if record.engine_queue_ms is None else round(record.engine_queue_ms * NS_PER_MS)
    return TtftSplit(ttft_ns - (queue or 0) - prefill, queue, prefill)


@dataclass(slots=True, frozen=True)
class LagParts:
    """An open-loop request's lag by cause, in nanoseconds; they sum to its lag."""

    prepare_ns: int
    cap_ns: int
    dispatch_ns: int
    connect_ns: int
    write_ns: int

    def items(self) -> tuple[tuple[str, int], ...]:
        """``(histogram name, value)`` of each part (``lag_prepare``, ...)."""
        return (
            (LAG_PREPARE.name, self.prepare_ns),
            (LAG_CAP.name, self.cap_ns),
            (LAG_DISPATCH.name, self.dispatch_ns),
            (LAG_CONNECT.name, self.connect_ns),
            (LAG_WRITE.name, self.write_ns),
        )


def lag_parts(record: RequestRecord) -> LagParts | None:
    """Where a written open-loop request's lag came from (None: not scheduled, or
    never written): the dispatcher's wait for it to be built, its waits for
    a free slot under the in-flight cap, then the dispatcher itself until the
    send started, then connect and write."""
    scheduled = record.scheduled_ns
    if scheduled is None or not record.sent_ns:
        return None
    connected = record.connected_ns or record.start_ns
    return LagParts(
        prepare_ns=record.prepare_wait_ns,
        cap_ns=record.cap_wait_ns,
        dispatch_ns=record.start_ns - scheduled - record.prepare_wait_ns - record.cap_wait_ns,
        connect_ns=connected - record.start_ns,
        write_ns=record.sent_ns - connected,
    )


@dataclass(slots=True, frozen=True)
class AnswerMetrics:
    """The answer apart from the reasoning before it. ``reasoning`` is False for
    a stream that carried no reasoning text: then every answer latency equals
    its headline twin (TTFA is TTFT) and the reasoning token count is the
    server's, if it reported hidden reasoning, else 0."""

    reasoning: bool
    ttfa_ns: int | None
    reasoning_ns: int | None
    reasoning_tokens: int
    answer_tokens: int
    itl_ns: list[tuple[float, int]]
    tpot_ns: float | None

    @property
    def split(self) -> bool:
        """Whether the answer differs from the whole output: the request reasoned,
        visibly or (by the server's count) hidden."""
        return self.reasoning or self.reasoning_tokens > 0


def output_token_count(record: RequestRecord) -> tuple[int, CountMethod]:
    """The request's output tokens: server usage, else a tokenizer, else chunks."""
    if record.output_tokens is not None:
        return record.output_tokens, CountMethod.USAGE
    if record.tokenizer_tokens is not None:
        return record.tokenizer_tokens, CountMethod.TOKENIZER
    return len(record.chunk_ns), CountMethod.CHUNKS


def apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` tokens over chunks in proportion to ``weights`` (text length).

    Largest-remainder rounding keeps the sum exact. A chunk that carried text
    carried at least one token, so every chunk gets one before the rest is
    shared out; when the total is smaller than the chunk count (a server whose
    usage disagrees with its own stream) every chunk counts as one token.
    """
    n = len(weights)
    if n == 0:
        return []
    if total < n:
        return [1] * n
    spare = total - n
    weight_sum = sum(weights)
    if weight_sum <= 0:
        weights, weight_sum = [1] * n, n
    shares = [spare * w / weight_sum for w in weights]
    counts = [int(s) for s in shares]
    leftover = spare - sum(counts)
    by_remainder = sorted(range(n), key=lambda i: counts[i] - shares[i])
    for i in by_remainder[:leftover]:
        counts[i] += 1
    return [c + 1 for c in counts]


def chunk_token_counts(record: RequestRecord, total: int) -> tuple[list[int], ChunkTokenMethod]:
    """Tokens carried by each output chunk, and how they were known.

    Per-chunk usage may sum to less than the total: vLLM counts the EOS token
    in a final chunk without text, which carries no output. A counted total
    equal to the number of chunks is exact too: every output chunk carries at
    least one token, so each carried exactly one.
    """
    exact = record.chunk_tokens
    n = len(record.chunk_ns)
    if exact and len(exact) == n and sum(exact) <= total:
        return list(exact), ChunkTokenMethod.EXACT
    if record.output_tokens is None and record.tokenizer_tokens is None and not exact:
        return [1] * n, ChunkTokenMethod.ONE_PER_CHUNK
    if total == n:
        return [1] * n, ChunkTokenMethod.EXACT
    return apportion(total, record.chunk_chars), ChunkTokenMethod.PROPORTIONAL


def per_token_itl(chunk_ns: list[int], tokens: list[int]) -> list[tuple[float, int]]:
    """(gap per token, token count) for every chunk after the first."""
    return _itl_of_gaps(_gaps(chunk_ns), tokens)


def _gaps(chunk_ns: list[int]) -> list[int]:
    return list(map(operator.sub, itertools.islice(chunk_ns, 1, None), chunk_ns))


def _itl_of_gaps(gaps: list[int], tokens: list[int]) -> list[tuple[float, int]]:
    """Per-token ITL from the chunk gaps; a chunk without tokens passes its gap on
    to the next chunk that has some. Runs once per request over every chunk, so
    the usual case (every chunk carried tokens) is one comprehension."""
    later = tokens[1:]
    if min(later, default=1) > 0:
        return [(gap / k, k) for gap, k in zip(gaps, later, strict=True)]
    samples: list[tuple[float, int]] = []
    carried = 0
    for gap, k in zip(gaps, later, strict=True):
        carried += gap
        if k > 0:
            samples.append((carried / k, k))
            carried = 0
    return samples


def answer_chunk_tokens(tokens: list[int], chars: list[int], reasoning: list[int]) -> list[int]:
    """Answer tokens of each chunk: all of a chunk without reasoning, none of a
    chunk of reasoning alone, and of a mixed chunk its share by characters (at
    least one, since it carried answer text)."""
    answer = []
    for k, c, r in zip(tokens, chars, reasoning, strict=True):
        if r == 0:
            answer.append(k)
        elif r >= c:
            answer.append(0)
        else:
            answer.append(max(1, round(k * (c - r) / c)))
    return answer


def tpot(first_ns: int, last_ns: int, tokens: int) -> float | None:
    return (last_ns - first_ns) / (tokens - 1) if tokens > 1 else None


def answer_metrics(
    record: RequestRecord, tokens: list[int], total: int, itl: list[tuple[float, int]]
) -> AnswerMetrics:
    """TTFA, reasoning time, the token split, and the answer's ITL and TPOT."""
    chunks = record.chunk_ns
    reported = record.reasoning_tokens
    if not record.chunk_reasoning:
        hidden = min(reported or 0, total)
        first = chunks[0] - record.start_ns if chunks else None
        answer_tpot = tpot(chunks[0], chunks[-1], total - hidden) if chunks else None
        return AnswerMetrics(False, first, None, hidden, total - hidden, itl, answer_tpot)
    per_chunk = answer_chunk_tokens(tokens, record.chunk_chars, record.chunk_reasoning)
    counted = sum(tokens) - sum(per_chunk)
    reasoning_tokens = min(reported if reported is not None else counted, total)
    answer_tokens = total - reasoning_tokens
    pairs = zip(record.chunk_chars, record.chunk_reasoning, strict=True)
    answer_idx = [i for i, (c, r) in enumerate(pairs) if c > r]
    first_reasoning = next(i for i, r in enumerate(record.chunk_reasoning) if r)
    if not answer_idx:
        return AnswerMetrics(True, None, None, reasoning_tokens, answer_tokens, [], None)
    at = [chunks[i] for i in answer_idx]
    return AnswerMetrics(
        reasoning=True,
        ttfa_ns=at[0] - record.start_ns,
        reasoning_ns=at[0] - chunks[first_reasoning] if first_reasoning < answer_idx[0] else 0,
        reasoning_tokens=reasoning_tokens,
        answer_tokens=answer_tokens,
        itl_ns=per_token_itl(at, [per_chunk[i] for i in answer_idx]),
        tpot_ns=tpot(at[0], at[-1], answer_tokens),
    )


def request_metrics(record: RequestRecord) -> RequestMetrics:
    """All metrics of one finished request (successful or not)."""
    chunks = record.chunk_ns
    total, count_method = output_token_count(record)
    tokens, token_method = chunk_token_counts(record, total)
    first = chunks[0] if chunks else None
    gaps = _gaps(chunks)
    itl = _itl_of_gaps(gaps, tokens)
    scheduled = record.scheduled_ns
    ttft = None if first is None else first - record.start_ns
    return RequestMetrics(
        ttft_ns=ttft,
        e2e_ns=record.end_ns - record.start_ns,
        tpot_ns=tpot(chunks[0], chunks[-1], total) if chunks else None,
        itl_ns=itl,
        chunk_gaps_ns=gaps,
        max_stall_ns=max(gaps) if gaps else None,
        output_tokens=total,
        count_method=count_method,
        chunk_token_method=token_method,
        ttft_sched_ns=None if first is None or scheduled is None else first - scheduled,
        e2e_sched_ns=None if scheduled is None else record.end_ns - scheduled,
        lag_ns=None if scheduled is None else (record.sent_ns or record.start_ns) - scheduled,
        lag_parts=lag_parts(record),
        answer=answer_metrics(record, tokens, total, itl),
        ttftc_ns=None if record.tool_call_ns is None else record.tool_call_ns - record.start_ns,
        ttft_split=ttft_split(record, ttft),
    )
