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
no latency percentile. Each row keeps the request's identity too (its
request, trace and span ids, and the engine's id of its reply), so the
timeline page finds a request a log line names. About
150 bytes a request, in flat arrays; past ``MAX_REQUESTS`` further requests
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
ID_BYTES = 40  # a row's request id (16 bytes), trace id (16) and span id (8)
NO_ENGINE_ID = -1


@dataclass(frozen=True, slots=True)
class RowIds:
    """A row's identity as hex (docs/load.md, "Request identity"), and the
    engine's id of its reply ("" when the reply had none)."""

    request_id: str
    trace_id: str
    span_id: str
    engine_id: str


@dataclass
class Timelines:
    """Per-request columns (``UNKNOWN`` where a value was not measured), the
    scenario of each row by index into ``scenarios``, its sender (``user``:
    ``UNKNOWN_USER`` in timelines saved before senders were recorded), its
    flags (``cut_off``: none in timelines saved before they were kept), and
    the kept gaps as (row, end of the gap in ms after the request's start,
    gap in ms).

    ``ids`` packs each row's request, trace and span ids (``ID_BYTES``; none
    in timelines saved before they were kept). The engine's ids are kept
    once each in ``engine_ids``, a row naming its own by index
    (``engine_id``, ``NO_ENGINE_ID`` for none) with its request id cut from
    the end when the engine's id ended with it (``engine_tail``): vLLM's
    ``chatcmpl-<request id>`` is then one entry for the whole run."""

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
    ids: bytearray = field(default_factory=bytearray)
    engine_ids: list[str] = field(default_factory=list)
    engine_id: array[int] = field(default_factory=lambda: array("i"))
    engine_tail: array[int] = field(default_factory=lambda: array("b"))
    _engine_index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

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
        self._add_ids(record)
        return len(self) - 1

    def _add_ids(self, record: RequestRecord) -> None:
        self.pad_ids(len(self) - 1)
        self.ids += _packed_ids(record)
        engine = record.engine_request_id
        tail = bool(record.request_id) and engine is not None and engine.endswith(record.request_id)
        if tail:
            assert engine is not None
            engine = engine[: -len(record.request_id)]
        self.engine_id.append(NO_ENGINE_ID if engine is None else self._engine_index_of(engine))
        self.engine_tail.append(tail)

    def pad_ids(self, rows: int) -> None:
        """Give the rows up to ``rows`` that have none empty ids, so every
        later row's ids stay at its index (rows built column by column, or
        read from timelines saved before ids were kept, have none)."""
        missing = rows - len(self.engine_id)
        if missing > 0:
            self.ids += bytes(missing * ID_BYTES)
            self.engine_id.extend([NO_ENGINE_ID] * missing)
            self.engine_tail.extend([0] * missing)

    def _engine_index_of(self, text: str) -> int:
        index = self._engine_index.get(text)
        if index is None:
            index = self._engine_index[text] = len(self.engine_ids)
            self.engine_ids.append(text)
        return index

    def row_ids(self, row: int) -> RowIds | None:
        """``row``'s ids; None when none were kept for it."""
        packed = self.ids[row * ID_BYTES : (row + 1) * ID_BYTES]
        if len(packed) < ID_BYTES or not any(packed) or row >= len(self.engine_id):
            return None
        text = packed.hex()
        index = self.engine_id[row]
        engine = "" if index == NO_ENGINE_ID else self.engine_ids[index]
        if self.engine_tail[row]:
            engine += text[:32]
        return RowIds(text[:32], text[32:64], text[64:], engine)

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
        self.pad_ids(offset)
        other.pad_ids(taken)
        self.ids += other.ids[: taken * ID_BYTES]
        texts = [self._engine_index_of(text) for text in other.engine_ids]
        self.engine_id.extend(
            NO_ENGINE_ID if i == NO_ENGINE_ID else texts[i] for i in other.engine_id[:taken]
        )
        self.engine_tail.extend(other.engine_tail[:taken])
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
            "ids": self.ids.hex(),
            "engine_ids": list(self.engine_ids),
            "engine_id": self.engine_id.tolist(),
            "engine_tail": self.engine_tail.tolist(),
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
        ids = _decoded_ids(data, rows)
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
            ids=ids,
            engine_ids=list(data.get("engine_ids", [])),
            engine_id=array("i", data.get("engine_id", [])),
            engine_tail=array("b", data.get("engine_tail", [])),
            _engine_index={text: i for i, text in enumerate(data.get("engine_ids", []))},
        )


def _packed_ids(record: RequestRecord) -> bytes:
    """A record's request, trace and span ids as ``ID_BYTES`` bytes; zeros
    when it has none (a record not sent by the client)."""
    try:
        packed = bytes.fromhex(record.request_id + record.trace_id + record.span_id)
    except ValueError:
        packed = b""
    return packed if len(packed) == ID_BYTES else bytes(ID_BYTES)


def _decoded_ids(data: dict[str, Any], rows: int) -> bytearray:
    """The packed ids of saved timelines (none before they were kept);
    ValueError when they do not cover the rows or name an engine id that
    is not there."""
    ids = bytearray.fromhex(data.get("ids", ""))
    engine_id = data.get("engine_id", [])
    if ids and (len(ids) != rows * ID_BYTES or len(engine_id) != rows):
        raise ValueError(f"timelines: the ids cover {len(ids) // ID_BYTES} rows, not {rows}")
    if len(data.get("engine_tail", [])) != len(engine_id):
        raise ValueError("timelines: the engine ids' columns differ in length")
    if any(not NO_ENGINE_ID <= i < len(data.get("engine_ids", [])) for i in engine_id):
        raise ValueError("timelines: an engine id index out of range")
    return ids


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
