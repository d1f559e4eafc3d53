"""Trace replay: each row of a trace is one request with its lengths.

Open loop replays the trace's own arrival times (scaled by ``load.rate``), so
bursts stay as recorded. When a trace lists prefix-block ids per request (as
production traces that publish block hashes do), every id becomes a fixed text
of ``block_tokens`` tokens, the same for every stream and worker, so requests
that share ids share a prompt prefix and the engine's prefix cache sees the
reuse the trace recorded.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from slogate.scenarios import traces
from slogate.scenarios.datasets import TRACE_LAYOUTS, DatasetReport, TraceColumns
from slogate.scenarios.distributions import Dist
from slogate.scenarios.limits import MAX_TOKENS
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import nonce
from slogate.scenarios.schema import (
    TEXT,
    TEXT_LIST,
    Reader,
    choice,
    integer,
    join,
    nested,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.workloads.common import SALT_BLOCKS, TEXT_FIELD, Context, seconds

BLOCK_CACHE = 4096

COLUMN_FIELDS = {
    "time": optional(TEXT),
    "input_tokens": optional(TEXT),
    "output_tokens": optional(TEXT),
    "prefix_blocks": optional(TEXT),
    "model": optional(TEXT),
}


def read_columns(reader: Reader, value: Any, path: str) -> TraceColumns | None:
    f = reader.section(value, path, COLUMN_FIELDS)
    return None if f is None else TraceColumns(**f)


FIELDS = {
    "kind": required(choice("trace")),
    "file": required(TEXT),
    "format": optional(choice(*traces.TRACE_FORMATS), "auto"),
    "columns": nested(read_columns, section_shape(COLUMN_FIELDS)),
    "time_unit": optional(choice(*traces.TIME_UNITS)),
    "failed": optional(choice(*traces.FAILED), "keep"),
    "models": optional(TEXT_LIST, ()),
    "block_tokens": optional(integer(ge=2, le=MAX_TOKENS), 512),
    "text": TEXT_FIELD,
    "think_time_s": seconds(0),
}


@dataclass(frozen=True, slots=True)
class TraceWorkload:
    trace: traces.Trace
    block_tokens: int
    think_time_s: Dist
    text: str = "prose"
    kind: str = "trace"

    @property
    def corpus(self) -> str:
        return self.text

    @property
    def report(self) -> DatasetReport | None:
        return self.trace.report

    def planner(self, ctx: Context) -> TracePlanner:
        return TracePlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> TraceWorkload | None:
    if f["format"] in TRACE_LAYOUTS:
        clashes = [key for key in ("columns", "time_unit") if f[key] is not None]
        for key in clashes:
            reader.problem(
                join(path, key),
                f"format: {f['format']} has its own {key}; remove {key}, or use "
                "format: csv or jsonl to name them",
            )
        if clashes:
            return None
    try:
        file = traces.resolve(f["file"], reader.base_dir)
        trace = traces.load_trace(
            file, f["columns"], f["time_unit"] or "auto", f["format"], f["failed"], f["models"]
        )
    except traces.TraceError as exc:
        reader.problem(join(path, exc.key), str(exc))
        return None
    return TraceWorkload(
        trace=trace,
        block_tokens=f["block_tokens"],
        think_time_s=f["think_time_s"],
        text=f["text"],
    )


class TracePlanner:
    """Closed loop walks the rows from a stream's own random start; open loop
    takes the row of each arrival."""

    def __init__(self, ctx: Context, spec: TraceWorkload) -> None:
        self.ctx = ctx
        self.spec = spec
        self.rows = spec.trace.rows
        self.start = int(ctx.rng.integers(0, self.rows))
        self.block = functools.lru_cache(maxsize=BLOCK_CACHE)(self._block)

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        return (self._row(index, (self.start + index) % self.rows),)

    def request(self, index: int, event: int) -> PlannedTurn:
        return self._row(index, event % self.rows)

    def _block(self, block_id: str) -> tuple[str, int]:
        """The fixed text of one prefix block: the same wherever it is planned."""
        digest = hashlib.blake2b(block_id.encode(), digest_size=8).digest()
        rng = self.ctx.shared_rng(SALT_BLOCKS, int.from_bytes(digest, "big"))
        return self.ctx.writer.fill(rng, self.spec.block_tokens, suffix="\n")

    def _row(self, index: int, row: int) -> PlannedTurn:
        ctx, trace = self.ctx, self.spec.trace
        want = int(trace.input_tokens[row])
        ids = trace.prefix_blocks[row] if trace.prefix_blocks is not None else ()
        shared = ids[: want // self.spec.block_tokens]
        blocks = [self.block(i) for i in shared]
        text = "".join(t for t, _ in blocks)
        used = sum(c for _, c in blocks)
        if used < want or not blocks:
            header = f"[{nonce(ctx.rng)}]\n"
            known = used + ctx.writer.count(header)
            text, used = ctx.writer.fill(ctx.rng, want, text + header, "", known)
        output = int(trace.output_tokens[row])
        return ctx.turn(
            index,
            0,
            user_text=text,
            max_tokens=output,
            intended_input_tokens=used,
            intended_output_tokens=output,
            think_time_s=float(self.spec.think_time_s.sample(ctx.rng, 1)[0]),
            prefix_id=_prefix_id(shared),
        )


def _prefix_id(block_ids: tuple[str, ...]) -> str | None:
    if not block_ids:
        return None
    digest = hashlib.blake2b("\x1f".join(block_ids).encode(), digest_size=6).hexdigest()
    return f"blocks:{len(block_ids)}:{digest}"
