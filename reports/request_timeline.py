"""The request timeline: every request a bar from its send to its last token,
in its sender's lane, over the run, as vLLM's ``--plot-timeline`` draws a
benchmark.

Percentiles say how slow the tail was; this page shows when and beside what:
a stream whose bar darkens (a stall) while another request's first token
lands is prefill interference, a run of long grey heads is a queue, users that
all wait at once are head-of-line blocking. A lane is one sender's
(``RequestRecord.user``), so it shows a user's requests one after another,
its think times between them. It is drawn from
``data/timelines.json``: the bar's grey head is the wait for the first token
(marked with a tick), its body is coloured by the request's mean ITL (TPOT)
against the scenario's ITL or TPOT limit, and its longest gaps between chunks
are drawn dark on it. The SVG is written here; a few lines of script show a
hovered bar's numbers and ids (as text, never markup), and find the drawn
requests of a request id, trace id or engine id pasted from a log.
"""

from __future__ import annotations

import heapq
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup

from slogate.analysis.measurement.records import sender_parts
from slogate.analysis.measurement.timelines import UNKNOWN, UNKNOWN_USER, Timelines
from slogate.reports.html import num, render
from slogate.reports.svg import clock, esc, time_ticks
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT

MAX_BARS = 2000
MAX_LANES = 200  # senders drawn at most, so a lane stays 4 px high or more
SLOWEST_KEPT = 50
WIDTH, LEFT, RIGHT, TOP, BOTTOM = 1160, 44, 12, 8, 30
# the body's colour: mean ITL under half the limit, under it, at or over it; unknown
ITL_CLASSES = ("fast", "near", "over")
# a request's mean ITL limit when its scenario declares none: this many times the run's median
UNDECLARED_LIMIT_X_MEDIAN = 2.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The rows drawn, in send order, and what the page says about the choice:
    which senders (whole), then which of their requests."""

    rows: list[int]
    total: int
    senders: int  # drawn
    senders_total: int
    senders_every: int  # 1: every sender is drawn
    senders_slowest: int  # senders kept besides every ``senders_every``-th: a slowest request's
    every: int  # 1: every request of the drawn senders
    slowest: int  # rows kept besides every ``every``-th: the longest E2E


def sample(
    starts: Sequence[float],
    e2e_ms: Sequence[float],
    senders: Sequence[int],
    bars: int = MAX_BARS,
    lanes: int = MAX_LANES,
    slowest: int = SLOWEST_KEPT,
) -> Sample:
    """Senders whole, so a lane shows one sender's sequence: every one when
    they fit in ``lanes``, else every k-th by first send and those of the
    ``slowest`` requests (E2E) besides; then every request of theirs when they
    fit in ``bars``, else every j-th of each sender's by send time and the
    ``slowest`` besides, so the tail is never sampled away."""
    order = sorted(range(len(starts)), key=starts.__getitem__)
    firsts = list(dict.fromkeys(map(senders.__getitem__, order)))  # in order of first send
    tail = heapq.nlargest(slowest, range(len(e2e_ms)), key=e2e_ms.__getitem__)
    senders_every = 1 if len(firsts) <= lanes else math.ceil(len(firsts) / (lanes - slowest))
    kept = set(firsts[::senders_every])
    extra_senders = {senders[row] for row in tail} - kept
    kept |= extra_senders
    chosen = order if len(kept) == len(firsts) else [r for r in order if senders[r] in kept]
    every = 1 if len(chosen) <= bars else math.ceil(len(chosen) / (bars - slowest))
    drawn = chosen if every == 1 else nth_of_each(chosen, senders, every)
    drawn_set = set(drawn)
    extra = [row for row in tail if row not in drawn_set]
    return Sample(
        sorted([*drawn, *extra], key=starts.__getitem__), len(order), len(kept), len(firsts),
        senders_every, len(extra_senders), every, len(extra),
    )  # fmt: skip


def nth_of_each(rows: Iterable[int], senders: Sequence[int], every: int) -> list[int]:
    """Of ``rows``, each sender's first and then every ``every``-th."""
    seen: dict[int, int] = {}
    out = []
    for row in rows:
        key = senders[row]
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n % every == 0:
            out.append(row)
    return out


def lanes(spans: Iterable[tuple[float, float]]) -> list[int]:
    """Each span (start, end), in start order, in the lowest lane free at its
    start: a sender's requests that overlapped (an agent's parallel
    subagents) go side by side, and it takes as many lanes as it ever had in
    flight at once."""
    busy: list[tuple[float, int]] = []
    free: list[int] = []
    out: list[int] = []
    count = 0
    for start, end in spans:
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        heapq.heappush(busy, (end, lane))
        out.append(lane)
    return out


@dataclass(frozen=True, slots=True)
class Band:
    """A sender's lanes: the first and how many."""

    sender: int
    top: int
    lanes: int


def sender_lanes(
    senders: Sequence[int], spans: Sequence[tuple[float, float]]
) -> tuple[list[int], list[Band]]:
    """Each request's lane (``senders`` and ``spans`` in send order): every
    sender gets lanes of its own, in the order of its first send, and its
    requests are laid in them as :func:`lanes` lays them."""
    members: dict[int, list[int]] = {}
    for index, key in enumerate(senders):
        members.setdefault(key, []).append(index)
    lane_of = [0] * len(senders)
    bands = []
    top = 0
    for key, indices in members.items():
        own = lanes(spans[i] for i in indices)
        for index, lane in zip(indices, own, strict=True):
            lane_of[index] = top + lane
        bands.append(Band(key, top, max(own) + 1))
        top += max(own) + 1
    return lane_of, bands


def sender_label(user: int, processes: bool) -> tuple[str, str]:
    """A sender's name, short (beside its lane) and long (on hover);
    ``processes``: the run's senders came from more than one process."""
    if user == UNKNOWN_USER:
        return "?", "sender unknown (saved before senders were recorded)"
    kind, process, number = sender_parts(user)
    if not processes:
        return f"{number}", f"{kind} {number}"
    return f"{process}\u00b7{number}", f"{kind} {number} of load process {process}"


def itl_class(tpot_ms: float, limit_ms: float | None) -> str:
    if tpot_ms == UNKNOWN or limit_ms is None:
        return "unknown"
    return ITL_CLASSES[(tpot_ms >= limit_ms / 2) + (tpot_ms >= limit_ms)]


def itl_limits(t: Timelines, slos: Mapping[str, Sequence[Any]]) -> dict[str, tuple[float, str]]:
    """Per scenario the mean-ITL limit its bars are coloured against and where
    it came from: the lowest ITL or TPOT limit it declares, else twice the
    run's median TPOT."""
    tpots = sorted(v for v in t.columns[TPOT.key] if v != UNKNOWN)
    median = tpots[len(tpots) // 2] if tpots else None
    limits = {}
    for name in t.scenarios:
        declared = [s.threshold for s in slos.get(name, ()) if s.metric in (ITL.key, TPOT.key)]
        if declared:
            limits[name] = (min(declared), "its ITL/TPOT SLO")
        elif median is not None:
            limits[name] = (UNDECLARED_LIMIT_X_MEDIAN * median, "twice the run's median TPOT")
    return limits


def origin(started_at: str | None, starts: Sequence[float]) -> float:
    """The run's start on the wall clock, so the page's seconds are the
    report's; the first send when the metadata has none."""
    if started_at:
        try:
            return datetime.fromisoformat(started_at).timestamp()
        except ValueError:
            pass
    return min(starts, default=0.0)


def gaps_of_rows(t: Timelines, rows: Iterable[int]) -> dict[int, list[tuple[float, float]]]:
    """The kept gaps of ``rows``: (end, length) in ms after each one's send.
    Timelines keeps gaps in row order, so a row's are found by bisection: a
    sample of a 500,000-request run reads its 2,000 rows' gaps, not 4 million."""
    found = {}
    for row in rows:
        first = bisect_left(t.gap_row, row)
        last = bisect_right(t.gap_row, row, first)
        if last > first:
            found[row] = list(zip(t.gap_end_ms[first:last], t.gap_ms[first:last], strict=True))
    return found


def request_numbers(
    t: Timelines, row: int, t0: float, gaps: list[tuple[float, float]], processes: bool
) -> list[Any]:
    """What hovering a bar shows, in the order the page's script reads it
    (its ids last: null each when none were kept)."""
    c = t.columns
    ids = t.row_ids(row)

    def value(name: str, digits: int = 1) -> float | None:
        v = c[name][row]
        return None if v == UNKNOWN else round(v, digits)

    return [
        t.scenarios[t.scenario[row]], round(c["start_s"][row] - t0, 3), value(TTFT.key),
        value(E2E.key), value(TPOT.key, 2), value("input_tokens", 0), value("cached_tokens", 0),
        value("output_tokens", 0), int(c["conversation"][row]), int(c["turn"][row]),
        bool(t.flags["ok"][row]), bool(t.flags["warmup"][row]), len(gaps),
        round(max(g for _, g in gaps), 1) if gaps else None,
        sender_label(t.user[row], processes)[1], bool(t.flags["cut_off"][row]),
        *(
            (None,) * 4 if ids is None
            else (ids.request_id, ids.trace_id, ids.span_id, ids.engine_id or None)
        ),
    ]  # fmt: skip


def rect(x: float, y: float, width: float, height: float, kind: str) -> str:
    return (
        f'<rect x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{height:.2f}" class="{kind}"/>'
    )


@dataclass(frozen=True, slots=True)
class Frame:
    """Where the bars go: seconds to x, a lane to y."""

    lo: float
    scale: float
    lane_h: float

    def x(self, seconds: float) -> float:
        return LEFT + (seconds - self.lo) * self.scale

    def y(self, lane: int) -> float:
        return TOP + lane * self.lane_h


def bar_svg(
    t: Timelines,
    row: int,
    index: int,
    span: tuple[float, float],
    y: float,
    frame: Frame,
    kind: str,
    gaps: Sequence[tuple[float, float]],
) -> str:
    """One request: the wait for its first token, the tick, its coloured body,
    its long gaps; ``data-i`` indexes its numbers for the hover."""
    c = t.columns
    start, end = span
    x, h = frame.x, max(frame.lane_h - 1.5, 2.5)
    first = c[TTFT.key][row]
    body_from = end if first == UNKNOWN else start + first / 1000.0
    flags = "".join(
        f" {name}"
        for name, on in (
            ("cutoff", t.flags["cut_off"][row]),
            ("failed", not t.flags["ok"][row] and not t.flags["cut_off"][row]),
            ("warmup", t.flags["warmup"][row]),
        )
        if on
    )
    parts = [
        f'<g class="req{flags}" data-i="{index}">',
        rect(x(start), y, max(x(end) - x(start), 1.0), h, "wait"),
    ]
    if body_from < end:
        parts.append(rect(x(body_from), y, max(x(end) - x(body_from), 0.5), h, f"itl {kind}"))
    if first != UNKNOWN:
        parts.append(rect(x(body_from) - 0.6, y - 1, 1.2, h + 2, "ft"))
    for gap_end, gap in gaps:
        left, right = x(start + (gap_end - gap) / 1000.0), x(start + gap_end / 1000.0)
        parts.append(rect(left, y + h / 4, max(right - left, 0.8), h / 2, "stall"))
    parts.append("</g>")
    return "".join(parts)


def axis_svg(frame: Frame, ticks: Sequence[float], height: float, senders: str) -> str:
    """Gridlines and labels of the time axis, in seconds since the run's start;
    ``senders`` names what the lanes' labels count."""
    base = height - BOTTOM
    parts = [
        f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{base + 4:.1f}" class="g"/>'
        f'<text x="{x:.2f}" y="{base + 16:.1f}" class="xl">{esc(clock(t))}</text>'
        for t in ticks
        for x in (frame.x(t),)
    ]
    parts.append(
        f'<text x="{WIDTH - RIGHT}" y="{height - 2:.1f}" class="al">time since the run started'
        f'</text><text x="4" y="{height - 2:.1f}" class="al0">{esc(senders)}</text>'
    )
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Senders:
    """What the drawn senders were: their kind as a word (users, slots or
    sessions; senders when a mix has several kinds), and whether they came
    from more than one process."""

    word: str
    processes: bool

    @classmethod
    def of(cls, users: Iterable[int]) -> Senders:
        parts = [sender_parts(u) for u in set(users) if u != UNKNOWN_USER]
        kinds = {kind for kind, _, _ in parts}
        word = kinds.pop() if len(kinds) == 1 else "sender"
        return cls(word, len({process for _, process, _ in parts}) > 1)

    @property
    def axis(self) -> str:
        return f"process\u00b7{self.word}" if self.processes else self.word


def bars_svg(
    t: Timelines,
    drawn: Sample,
    t0: float,
    limits: dict[str, tuple[float, str]],
    gaps_of: dict[int, list[tuple[float, float]]],
    senders: Senders,
) -> Markup:
    """Each sender's lanes and their bars over a time axis, the sender named
    beside its lanes when they are tall enough to read."""
    c = t.columns
    spans = []
    for row in drawn.rows:
        start = c["start_s"][row] - t0
        spans.append((start, start + c[E2E.key][row] / 1000.0))
    lane_of, bands = sender_lanes([t.user[r] for r in drawn.rows], spans)
    count = sum(band.lanes for band in bands)
    lane_h = min(16.0, max(4.0, 640.0 / max(count, 1)))
    height = TOP + count * lane_h + BOTTOM
    lo, hi, ticks = time_ticks(
        min((s for s, _ in spans), default=0.0), max((e for _, e in spans), default=1.0)
    )
    frame = Frame(lo, (WIDTH - LEFT - RIGHT) / ((hi - lo) or 1.0), lane_h)
    parts = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" '
        f'height="{height:.0f}" role="img" aria-label="request timeline">',
        axis_svg(frame, ticks, height, senders.axis),
    ]
    bars: dict[int, list[str]] = {}
    for index, (row, span, lane) in enumerate(zip(drawn.rows, spans, lane_of, strict=True)):
        limit = limits.get(t.scenarios[t.scenario[row]])
        kind = itl_class(c[TPOT.key][row], limit[0] if limit else None)
        gaps = gaps_of.get(row, ())
        bar = bar_svg(t, row, index, span, frame.y(lane), frame, kind, gaps)
        bars.setdefault(lane, []).append(bar)
    for band in bands:
        short, long = sender_label(band.sender, senders.processes)
        parts.append(f'<g class="sender" data-sender="{esc(long)}">')
        if lane_h >= 9:
            y = frame.y(band.top) + lane_h * 0.75
            parts.append(f'<text x="{LEFT - 4}" y="{y:.1f}" class="ul">{esc(short)}</text>')
        for lane in range(band.top, band.top + band.lanes):
            parts.extend(bars[lane])
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def script_json(value: Any) -> Markup:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` that
    could end it or open a comment, whatever a scenario's name holds."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return Markup(text)


def ordinal(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def counted(n: int, noun: str) -> str:
    return f"{num(n)} {noun}" + ("" if n == 1 else "s")


def sample_text(drawn: Sample, senders: str) -> str:
    """Which senders and requests the page draws, ``senders`` naming them."""
    if drawn.every == 1 and drawn.senders_every == 1:
        return f"all {counted(drawn.total, 'request')} of {counted(drawn.senders, senders)}"
    text = f"{num(len(drawn.rows))} of {num(drawn.total)} requests, "
    if drawn.senders_every == 1:
        text += f"of all {counted(drawn.senders, senders)}"
    else:
        text += (
            f"of {num(drawn.senders)} of {counted(drawn.senders_total, senders)} (each drawn "
            f"whole: every {ordinal(drawn.senders_every)} by first send, and the "
            f"{num(drawn.senders_slowest)} that sent one of the {SLOWEST_KEPT} slowest requests "
            "besides)"
        )
    if drawn.every > 1:
        text += (
            f"; of each one's requests every {ordinal(drawn.every)} by send time, and the "
            f"{num(drawn.slowest)} slowest (E2E) besides, so the tail is always drawn"
        )
    return text


def timeline_html(
    t: Timelines, meta: dict[str, Any], slos: Mapping[str, Sequence[Any]], verdict: str
) -> str:
    """The page: the senders' lanes, the legend, what was sampled, and each
    drawn request's numbers for the hover."""
    c = t.columns
    drawn = sample(c["start_s"], c[E2E.key], t.user)
    t0 = origin(meta.get("started_at"), c["start_s"])
    limits = itl_limits(t, slos)
    gaps_of = gaps_of_rows(t, drawn.rows)
    senders = Senders.of(t.user[row] for row in drawn.rows)
    return render(
        "timeline.html.j2",
        run_id=meta.get("run_id") or "",
        verdict=verdict,
        svg=bars_svg(t, drawn, t0, limits, gaps_of, senders),
        sampled=sample_text(drawn, senders.word),
        limits={name: (num(limit), why) for name, (limit, why) in limits.items()},
        dropped=t.dropped,
        numbers=script_json(
            [
                request_numbers(t, row, t0, gaps_of.get(row, []), senders.processes)
                for row in drawn.rows
            ]
        ),
    )
