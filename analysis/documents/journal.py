"""The run's journal: its data appended to ``data/journal.bin`` as it goes.

The process that assembles a run's data (the local runner, or the master of
``--processes`` workers) appends, once a second, what changed since its last
flush, so a process killed at any instant (SIGKILL, out of memory) leaves
every flush before the kill on disk, and :func:`replay` rebuilds from them
the data the final save would have written at the last one
(``RunData.load`` does, for a folder without its final save). At the end of
the run the journal gets a last flush and a complete frame, then the final
save (``data/run.json``, ``data/buckets.json``) is written as before.

Frames (``slogate.analysis.documents.frames``: length-prefixed, CRC-32 checked), the
bodies JSON unless said otherwise:

- ``H`` header, first: the journal's schema and the run's metadata at start;
- ``C`` counters of one bucket, whole (they are small), when they changed;
- ``D`` one histogram's delta: ``[scenario, span, metric]`` as JSON, a
  newline, a byte naming the width of the counts (0 to 3: uint8, uint16,
  uint32, int64), then the changed bucket indexes (uint16) and the count each
  gained, little-endian: only what changed since the last flush, found by
  comparing the counts array with its copy at the last flush;
- ``W`` the time-series rows closed since the last flush;
- ``A`` the endpoints' and replicas' time-series rows closed since the last
  flush (``slogate.analysis.measurement.timeseries.apart_row``);
- ``T`` the metadata keys whose value changed: it ends a flush; frames after
  the last ``T`` (a flush torn by the kill) are not replayed, so a replay
  always stands at a flush's end;
- ``E`` complete: the final save follows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from slogate.analysis.documents.frames import frame, read_frames
from slogate.analysis.documents.versions import RUNDATA_SCHEMA
from slogate.analysis.measurement.histograms import COUNTS_LEN, HistogramSet, histogram_from_counts
from slogate.analysis.measurement.recorder import Bucket, Counters

JOURNAL_FILE = "journal.bin"
JOURNAL_SCHEMA = "slogate.journal/1"
KILLED_REASON = (
    "the run ended without writing its results (its process was killed): "
    "these are its data as of its last journal flush"
)

HEADER = b"H"
COUNTERS = b"C"
DELTA = b"D"
WINDOWS = b"W"
APART = b"A"
TICK = b"T"
COMPLETE = b"E"

# Indexes fit 16 bits (a histogram has COUNTS_LEN buckets); each delta's gains
# take the narrowest of these that holds them all, named by its position.
_INDEX = np.dtype("<u2")
_WIDTHS = (np.dtype("<u1"), np.dtype("<u2"), np.dtype("<u4"), np.dtype("<i8"))
_COUNT = _WIDTHS[-1]
_LIMITS = (1 << 8, 1 << 16, 1 << 32)
assert COUNTS_LEN <= 1 << 16, "histogram bucket indexes no longer fit the journal's uint16"
_ABSENT = object()

HistogramKey = tuple[str, str, str]


def _json(value: Any) -> bytes:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)


def _counts_of(histogram: HdrHistogram) -> np.ndarray:
    """The histogram's counts array, shared with it (not a copy)."""
    return np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]


class HistogramDeltas:
    """What each histogram gained since the last call. The counts as last
    journaled are kept per histogram over the range of values recorded so far
    (a few thousand counters, not the 23,552 of the whole range) and compared
    with the live ones in one vectorized pass."""

    def __init__(self) -> None:
        self._seen: dict[HistogramKey, tuple[int, np.ndarray]] = {}
        self._totals: dict[HistogramKey, int] = {}
        self._extremes: dict[HistogramKey, tuple[int, int]] = {}

    def delta(self, key: HistogramKey, histogram: HdrHistogram) -> bytes | None:
        """The body of a ``D`` frame, or None when nothing was recorded since."""
        total = histogram.get_total_count()
        if self._totals.get(key, 0) == total:
            return None
        self._totals[key] = total
        start, seen = self._covering(key, histogram)
        live = _counts_of(histogram)[start : start + len(seen)]
        changed = np.flatnonzero(live != seen)
        now = live[changed]
        gained = now.astype(_COUNT) - seen[changed].astype(_COUNT)
        seen[changed] = now
        indexes = (changed + start).astype(_INDEX)
        width = _width(gained)
        body = indexes.tobytes() + gained.astype(_WIDTHS[width]).tobytes()
        return _json(list(key)) + b"\n" + bytes([width]) + body

    def _covering(self, key: HistogramKey, histogram: HdrHistogram) -> tuple[int, np.ndarray]:
        """The kept counts of ``key``, widened to cover the recorded range (hdrh
        finds an index in Python: only asked when the extremes moved)."""
        kept = self._seen.get(key)
        extremes = (histogram.min_value, histogram.max_value)
        if kept is not None and self._extremes.get(key) == extremes:
            return kept
        self._extremes[key] = extremes
        low = histogram.get_counts_array_index(histogram.get_min_value())
        high = histogram.get_counts_array_index(histogram.get_max_value()) + 1
        if kept is not None and kept[0] <= low and kept[0] + len(kept[1]) >= high:
            return kept
        if kept is not None:
            low, high = min(low, kept[0]), max(high, kept[0] + len(kept[1]))
        seen = np.zeros(high - low, np.uint64)
        if kept is not None:
            seen[kept[0] - low : kept[0] - low + len(kept[1])] = kept[1]
        self._seen[key] = (low, seen)
        return low, seen


def _width(gained: np.ndarray) -> int:
    """The narrowest of ``_WIDTHS`` holding every gain (a negative one: int64)."""
    if not len(gained) or gained.min() < 0:
        return len(_WIDTHS) - 1
    top = int(gained.max())
    return next((i for i, limit in enumerate(_LIMITS) if top < limit), len(_WIDTHS) - 1)


class JournalWriter:
    """Appends a run's frames to one file. Each flush goes out in one ``write``
    of a few kilobytes (the page cache takes it in microseconds; a SIGKILL does
    not lose what the kernel holds, only a power cut would)."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        clean: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """``clean`` masks secrets in metadata before it is written: applied to
        the keys that changed only, so a flush does not mask all of it again."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._deltas = HistogramDeltas()
        self._counters: dict[tuple[str, str], dict[str, Any]] = {}
        self._rows = {WINDOWS: 0, APART: 0}
        self._meta = dict(meta)
        self._clean = clean or dict
        self._collected: list[bytes] = []
        self._generation = 0
        header = {"schema": JOURNAL_SCHEMA, "meta": self._clean(meta)}
        self._write(frame(HEADER, _json(header)))

    def flush(
        self,
        buckets: dict[tuple[str, str], Bucket],
        rows: list[dict[str, Any]],
        meta: dict[str, Any],
        pause: Callable[[], object] | None = None,
        apart: list[dict[str, Any]] | None = None,
    ) -> int:
        """Append what changed since the last flush; the bytes written (0 once
        closed: completed, or a write failed). ``rows`` and ``apart`` (the
        endpoints' and replicas' rows) only grow. ``pause``, called after each
        histogram that changed, lets an event loop run meanwhile: the work between
        two calls stays in the tens of microseconds. What is recorded during a
        pause may reach some of the flush's histograms and not its counters;
        the next flush adds the rest (the final one is made without pauses). A
        flush started while another is paused takes over: it writes what the
        other found, and the other returns 0 when it resumes."""
        if self._fd is None:
            return 0
        self._generation += 1
        generation = self._generation
        frames = self._collected  # a flush paused under this one left its part here
        for (scenario, span), bucket in list(buckets.items()):
            counters = bucket.counters.to_dict()
            if self._counters.get((scenario, span)) != counters:
                self._counters[(scenario, span)] = counters
                frames.append(frame(COUNTERS, _json([scenario, span, counters])))
            for name in bucket.histograms.names():
                # one at a time: reading a histogram records its pending batch,
                # so that work is spread over the pauses too
                histogram = bucket.histograms.histogram(name)
                body = self._deltas.delta((scenario, span, name), histogram)
                if body is None:
                    continue  # unchanged: a comparison of two counts, no pause needed
                frames.append(frame(DELTA, body))
                if pause is not None:
                    pause()
                    if self._generation != generation:
                        return 0  # a later flush took over (and writes what this one found)
        for kind, kept in ((WINDOWS, rows), (APART, apart or [])):
            if len(kept) > self._rows[kind]:
                frames.append(frame(kind, _json(kept[self._rows[kind] :])))
                self._rows[kind] = len(kept)
        changed = {k: v for k, v in meta.items() if self._meta.get(k, _ABSENT) != v}
        self._meta.update(changed)
        frames.append(frame(TICK, _json(self._clean(changed))))
        data = b"".join(frames)
        self._collected = []
        self._write(data)
        return len(data)

    def complete(self) -> None:
        """The last frame: the run's final save follows. The file is closed."""
        if self._fd is not None:
            self._write(frame(COMPLETE, b""))
            os.close(self._fd)
            self._fd = None

    def _write(self, data: bytes) -> None:
        """All of ``data``, or OSError (disk full) and the journal is closed: a
        later frame after a partial one would be read as garbage anyway."""
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise


@dataclass
class Replayed:
    """A journal read back: the ``data/run.json`` document and the buckets the
    final save would have written at its last whole flush."""

    document: dict[str, Any]
    buckets: dict[tuple[str, str], Bucket]
    complete: bool


@dataclass
class _State:
    """The data rebuilt so far, a whole flush at a time."""

    meta: dict[str, Any]
    counters: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    counts: dict[HistogramKey, np.ndarray] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    apart_rows: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, kind: bytes, body: bytes) -> None:
        if kind == COUNTERS:
            scenario, span, counters = orjson.loads(body)
            self.counters[(scenario, span)] = counters
        elif kind == DELTA:
            self.add_delta(body)
        elif kind == WINDOWS:
            self.rows.extend(orjson.loads(body))
        elif kind == APART:
            self.apart_rows.extend(orjson.loads(body))
        elif kind == TICK:
            self.meta.update(orjson.loads(body))
        else:
            raise ValueError(f"an unknown frame kind {kind!r}")

    def add_delta(self, body: bytes) -> None:
        head, _, arrays = body.partition(b"\n")
        key = tuple(orjson.loads(head))
        count = _WIDTHS[arrays[0]]
        pairs = (len(arrays) - 1) // (_INDEX.itemsize + count.itemsize)
        indexes = np.frombuffer(arrays, _INDEX, pairs, offset=1)
        gained = np.frombuffer(arrays, count, pairs, offset=1 + pairs * _INDEX.itemsize)
        if len(key) != 3 or (pairs and int(indexes.max()) >= COUNTS_LEN):
            raise ValueError(f"histogram {key}: not a scenario, span and metric in range")
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = np.zeros(COUNTS_LEN, np.int64)
        counts[indexes] += gained

    def buckets(self) -> dict[tuple[str, str], Bucket]:
        histograms: dict[tuple[str, str], dict[str, HdrHistogram]] = {}
        for (scenario, span, name), counts in self.counts.items():
            if counts.any():
                histograms.setdefault((scenario, span), {})[name] = histogram_from_counts(counts)
        keys = sorted({*self.counters, *histograms})
        return {
            key: Bucket(
                HistogramSet.of(histograms.get(key, {})),
                Counters.from_dict(self.counters[key]) if key in self.counters else Counters(),
            )
            for key in keys
        }


def replay(path: Path) -> Replayed:
    """The journal at ``path`` read back up to its last whole flush; ValueError
    naming the file for one that is not a journal (a torn or corrupt end is
    not an error: reading stops there)."""
    frames = read_frames(path.read_bytes()).frames
    if not frames or frames[0][0] != HEADER:
        raise ValueError(f"{path}: not a slogate journal (no header frame)")
    try:
        header = orjson.loads(frames[0][1])
        if header.get("schema") != JOURNAL_SCHEMA:
            raise ValueError(f"schema {header.get('schema')!r}, expected {JOURNAL_SCHEMA}")
        state = _State(dict(header["meta"]))
        pending: list[tuple[bytes, bytes]] = []
        complete = False
        for kind, body in frames[1:]:
            if kind == COMPLETE:
                complete = True
                break
            pending.append((kind, body))
            if kind == TICK:
                for flushed in pending:
                    state.apply(*flushed)
                pending = []
        buckets = state.buckets()
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
        raise ValueError(f"{path}: a malformed journal frame: {error}") from error
    if not complete:
        state.meta["complete"] = False
        state.meta["incomplete_reason"] = KILLED_REASON
    document = {
        "schema": RUNDATA_SCHEMA,
        "meta": state.meta,
        "timeseries": state.rows,
        "timeseries_apart": state.apart_rows,
        "server_metrics": [],
    }
    return Replayed(document, buckets, complete)
