"""Each request's timeline in a few numbers, kept for the whole run.

The histograms say how slow the requests were; the diagnosis also needs when
each one ran beside which others: a stream that stalled while another
request's prompt was prefilled, a first token that waited behind a queue.
So every finished request leaves a row here (its start on the run's shared
wall clock, TTFT, E2E, token counts, prompt tokens served from the prefix
cache where the server said, turn, TPOT, who sent it, and its TTFT's queue
and prefill where the engine timed them) and its longest gaps
between output chunks (where in the stream each ended, and how long it was).
Conversation numbers are a user's own, so two users' may be equal; a
sender's id (``RequestRecord.user``) is unique in the run. A request the
run's end cut off after it was sent leaves a row too, flagged ``cut_off``
(and not ``ok``): its send, its first token if one came, and the cut as its
end, its planned input when the server's count never came, no gaps; the
engine worked on it beside the others (its prompt's prefill may be what
stalled them, and a first token that came timed that prefill), but it is in
no latency percentile. About
100 bytes a request, in flat arrays; past ``MAX_REQUESTS`` further requests
are counted, not kept. The rows ship from Locust workers to the master with
the histograms and are saved as ``data/timelines.json``.
"""

from __future__ import annotations

import heapq
from array import array
from dataclasses import dataclass, field
from typing import Any

from slogate.analysis.measurement.records import RequestRecord, reported_cached
from slogate.analysis.measurement.request_metrics import RequestMetrics
from slogate.scenarios.metrics import E2E, TPOT, TTFT

MAX_REQUESTS = 500_000
# a stream's gaps kept: its longest few that are at least twice its mean gap
GAPS_PER_REQUEST = 8
GAP_OVER_MEAN = 2.0
NS_PER_MS = 1e6
UNKNOWN = -1.0
UNKNOWN_USER = -1

COLUMNS = (
    "start_s",
    TTFT.key,
    E2E.key,
    TPOT.key,
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "conversation",
    "turn",
    "queue_ms",
    "prefill_ms",
)
# Columns timelines saved before them lack: read back as UNKNOWN.
LATER_COLUMNS = ("queue_ms", "prefill_ms")
FLAGS = ("ok", "warmup", "cut_off")


@dataclass
class Timelines:
    """Per-request columns (``UNKNOWN`` where a value was not measured), the
    scenario of each row by index into ``scenarios``, its sender (``user``:
    ``UNKNOWN_USER`` in timelines saved before senders were recorded), its
    flags (``cut_off``: none in timelines saved before they were kept), and
    the kept gaps as (row, end of the gap in ms after the request's start,
    gap in ms)."""

    scenarios: list[str] = field(default_factory=list)
    scenario: array[int] = field(default_factory=lambda: array("i"))
    user: array[int] = field(default_factory=lambda: array("q"))
    columns: dict[str, array[float]] = field(
        default_factory=lambda: {c: array("d") for c in COLUMNS}
    )
    flags: dict[str, array[int]] = field(default_factory=lambda: {f: array("b") for f in FLAGS})
    gap_row: array[int] = field(default_factory=lambda: array("i"))
    gap_end_ms: array[float] = field(default_factory=lambda: array("d"))
    gap_ms: array[float] = field(default_factory=lambda: array("d"))
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.scenario)

    def add(
        self, record: RequestRecord, m: RequestMetrics, end_wall_s: float, warmup: bool
    ) -> None:
        """One finished request (failed ones too: they held a slot while they ran)."""
        row = self._row(record, m, end_wall_s, warmup, cut_off=False)
        if row is None:
            return
        for end_ns, gap_ns in long_gaps(record.chunk_ns, m.chunk_gaps_ns, record.start_ns):
            self.gap_row.append(row)
            self.gap_end_ms.append(end_ns / NS_PER_MS)
            self.gap_ms.append(gap_ns / NS_PER_MS)

    def add_cut_off(
        self, record: RequestRecord, m: RequestMetrics, end_wall_s: float, warmup: bool
    ) -> None:
        """A request the run's end cut off after it was sent (``record.end_ns``:
        the cut): its send and first token, for the rules that pair other
        streams' stalls with them and the TTFT fits; no TPOT and no gaps,
        since its stream was not over."""
        self._row(record, m, end_wall_s, warmup, cut_off=True)

    def _row(
        self,
        record: RequestRecord,
        m: RequestMetrics,
        end_wall_s: float,
        warmup: bool,
        cut_off: bool,
    ) -> int | None:
        """Append a request's row; its index, None past ``MAX_REQUESTS``."""
        if len(self) >= MAX_REQUESTS:
            self.dropped += 1
            return None
        self.scenario.append(self._scenario_index(record.scenario))
        self.user.append(record.user)
        cached = reported_cached(record)
        split = m.ttft_split
        values = {
            "start_s": end_wall_s - m.e2e_ns / 1e9,
            TTFT.key: _ms(m.ttft_ns),
            E2E.key: m.e2e_ns / NS_PER_MS,
            TPOT.key: UNKNOWN if cut_off else _ms(m.tpot_ns),
            "input_tokens": _input_tokens(record, cut_off),
            "cached_tokens": UNKNOWN if cached is None else cached,
            "output_tokens": m.output_tokens,
            "conversation": record.conversation,
            "turn": record.turn,
            "queue_ms": UNKNOWN if split is None else _ms(split.queue_ns),
            "prefill_ms": UNKNOWN if split is None else split.prefill_ns / NS_PER_MS,
        }
        for name, value in values.items():
            self.columns[name].append(float(value))
        self.flags["ok"].append(record.ok and not cut_off)
        self.flags["warmup"].append(warmup)
        self.flags["cut_off"].append(cut_off)
        return len(self) - 1

    def mark_warmup(self, before_wall_s: float) -> None:
        """``--warmup auto``: the requests that ended before the cut was found
        to be (wall time) are warm-up, as if it had been known as they ended."""
        starts, e2e, warmup = self.columns["start_s"], self.columns[E2E.key], self.flags["warmup"]
        for row in range(len(self)):
            if starts[row] + e2e[row] / 1000 < before_wall_s:
                warmup[row] = True

    def _scenario_index(self, name: str) -> int:
        try:
            return self.scenarios.index(name)
        except ValueError:
            self.scenarios.append(name)
            return len(self.scenarios) - 1

    def extend(self, other: Timelines) -> None:
        """Append another process's rows (its scenario indices and gap rows remapped)."""
        room = max(MAX_REQUESTS - len(self), 0)
        taken = min(room, len(other))
        self.dropped += other.dropped + len(other) - taken
        offset = len(self)
        remap = [self._scenario_index(name) for name in other.scenarios]
        self.scenario.extend(remap[i] for i in other.scenario[:taken])
        self.user.extend(other.user[:taken])
        for name in COLUMNS:
            self.columns[name].extend(other.columns[name][:taken])
        for name in FLAGS:
            self.flags[name].extend(other.flags[name][:taken])
        for row, end, gap in zip(other.gap_row, other.gap_end_ms, other.gap_ms, strict=True):
            if row < taken:
                self.gap_row.append(row + offset)
                self.gap_end_ms.append(end)
                self.gap_ms.append(gap)

    def encode(self) -> dict[str, Any]:
        return {
            "scenarios": list(self.scenarios),
            "scenario": self.scenario.tolist(),
            "user": self.user.tolist(),
            **{name: self.columns[name].tolist() for name in COLUMNS},
            **{name: self.flags[name].tolist() for name in FLAGS},
            "gaps": {
                "row": self.gap_row.tolist(),
                "end_ms": self.gap_end_ms.tolist(),
                "gap_ms": self.gap_ms.tolist(),
            },
            "dropped": self.dropped,
        }

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Timelines:
        """The encoded form back; ValueError naming the column whose length or
        values do not fit."""
        rows = len(data["scenario"])
        saved = {**{name: [UNKNOWN] * rows for name in LATER_COLUMNS}, **data}
        columns = {name: saved[name] for name in (*COLUMNS, "ok", "warmup")}
        columns["user"] = data.get("user", [UNKNOWN_USER] * rows)
        columns["cut_off"] = data.get("cut_off", [0] * rows)
        for name, column in columns.items():
            if len(column) != rows:
                raise ValueError(f"timelines: column {name} has {len(column)} rows, not {rows}")
        gaps = data["gaps"]
        if not len(gaps["row"]) == len(gaps["end_ms"]) == len(gaps["gap_ms"]):
            raise ValueError("timelines: the gaps' columns differ in length")
        if any(not 0 <= i < len(data["scenarios"]) for i in data["scenario"]):
            raise ValueError("timelines: a scenario index out of range")
        if any(not 0 <= r < rows for r in gaps["row"]):
            raise ValueError("timelines: a gap of a row that does not exist")
        return cls(
            scenarios=list(data["scenarios"]),
            scenario=array("i", data["scenario"]),
            user=array("q", columns["user"]),
            columns={name: array("d", columns[name]) for name in COLUMNS},
            flags={name: array("b", columns[name]) for name in FLAGS},
            gap_row=array("i", gaps["row"]),
            gap_end_ms=array("d", gaps["end_ms"]),
            gap_ms=array("d", gaps["gap_ms"]),
            dropped=int(data.get("dropped", 0)),
        )


def _input_tokens(record: RequestRecord, cut_off: bool) -> float:
    """The server's prompt tokens; for a request cut off before its usage came,
    the tokens it was planned with (its first token still times the prefill
    of that prompt, docs/reports.md); ``UNKNOWN`` when neither is known."""
    tokens = record.input_tokens
    if tokens is None and cut_off:
        tokens = record.intended_input_tokens
    return UNKNOWN if tokens is None else float(tokens)


def _ms(ns: float | None) -> float:
    return UNKNOWN if ns is None else ns / NS_PER_MS


def long_gaps(chunk_ns: list[int], gaps_ns: list[int], start_ns: int) -> list[tuple[int, int]]:
    """(end of the gap after the start, gap) in ns of a stream's longest
    ``GAPS_PER_REQUEST`` gaps between output chunks (``gaps_ns[i]`` ends at
    ``chunk_ns[i + 1]``) that are at least ``GAP_OVER_MEAN`` times its mean
    gap: its stalls, if it had any."""
    if len(gaps_ns) < 2:
        return []
    floor = GAP_OVER_MEAN * (chunk_ns[-1] - chunk_ns[0]) / len(gaps_ns)
    if floor <= 0:
        return []
    longest = heapq.nlargest(
        GAPS_PER_REQUEST, ((g, i) for i, g in enumerate(gaps_ns) if g >= floor)
    )
    return [(chunk_ns[i + 1] - start_ns, g) for g, i in sorted(longest, key=lambda x: x[1])]
