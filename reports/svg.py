"""Small inline SVG charts: lines on linear, log or time axes, threshold rules,
confidence bands, point markers and whiskers (a scatter is markers without lines).

The report must open offline and without JavaScript, so charts are plain
``<svg>`` elements written here; hovering a line shows its name through SVG's
own ``<title>``. Every piece of text is escaped: series names come from
servers. Long series are thinned to the chart's width keeping each group's
minimum and maximum, so a one-window spike still shows.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from slogate.analysis.documents.neutral import neutral_text

PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f7f", "#000")
RULE_COLOR = "#c0392b"
Point = tuple[float, float | None]


def compact(value: float) -> str:
    """1234 -> 1.23k, 0.0123 -> 0.0123: short tick labels."""
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def clock(seconds: float) -> str:
    """Seconds as a short duration label: 45s, 12m, 1.5h."""
    if abs(seconds) < 60:
        return f"{seconds:g}s"
    if abs(seconds) < 3600:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:.3g}h"


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    dashed: bool = False


@dataclass(frozen=True)
class Rule:
    """A horizontal threshold line; ``x`` also marks the point the threshold is on."""

    y: float
    label: str
    x: float | None = None


@dataclass(frozen=True)
class Cut:
    """A vertical line at ``x``: where something starts, such as the measured window."""

    x: float
    label: str


@dataclass(frozen=True)
class Band:
    """A shaded interval around a series, e.g. each point's confidence interval;
    ``points`` are (x, low, high), a missing bound breaks the band."""

    name: str
    points: Sequence[tuple[float, float | None, float | None]]


@dataclass(frozen=True)
class Marker:
    """A point drawn on top: ``kind`` is its CSS class (a verdict, ``regression``);
    ``href`` makes it a link, ``label`` its hover text, ``tag`` a short text
    written beside it (a rank)."""

    x: float
    y: float
    kind: str
    label: str
    href: str | None = None
    tag: str = ""


@dataclass(frozen=True)
class Whisker:
    """A point's interval on both axes, drawn as a cross of capped lines: x from
    ``x_low`` to ``x_high`` and y from ``y_low`` to ``y_high`` (a missing bound
    draws that side only up to the point); ``label`` is its hover text."""

    x: float
    y: float
    x_low: float | None
    x_high: float | None
    y_low: float | None
    y_high: float | None
    label: str


@dataclass(frozen=True)
class Axis:
    label: str = ""
    log: bool = False
    time: bool = False
    ticks: Sequence[tuple[float, str]] | None = None
    fmt: Callable[[float], str] = compact


def thin(points: Sequence[Point], limit: int) -> list[Point]:
    """At most about ``limit`` points: each group keeps its lowest and highest."""
    if len(points) <= limit:
        return list(points)
    size = math.ceil(2 * len(points) / limit)
    out: list[Point] = []
    for start in range(0, len(points), size):
        group = [(x, y) for x, y in points[start : start + size] if y is not None]
        if not group:
            out.append((points[start][0], None))
            continue
        low = min(group, key=lambda p: p[1])
        high = max(group, key=lambda p: p[1])
        out.extend(sorted({low, high}))
    return out


def nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def linear_ticks(lo: float, hi: float, count: int = 5) -> tuple[float, float, list[float]]:
    """A range widened to whole steps and the ticks in it."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = nice_step(hi - lo, count)
    start, stop = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks = [start + i * step for i in range(round((stop - start) / step) + 1)]
    return start, stop, ticks


def time_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200)
    span = max(hi - lo, 1.0)
    step = next((s for s in steps if span / s <= 7), 86400 * math.ceil(span / 86400 / 7))
    start = math.floor(lo / step) * step
    ticks: list[float] = [start + i * step for i in range(math.floor((hi - start) / step) + 1)]
    return start, max(hi, start + step), ticks


def log_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """In log10 units: the range widened to the nearest 1-2-5 values around the data,
    ticks at whole decades, and at 2 and 5 too when the range is narrow."""
    steps = [
        d + math.log10(m) for d in range(math.floor(lo) - 1, math.ceil(hi) + 2) for m in (1, 2, 5)
    ]
    start = max(s for s in steps if s <= lo + 1e-9)
    stop = min(s for s in steps if s >= hi - 1e-9)
    if stop <= start:
        stop = min(s for s in steps if s > start)
    inside = [s for s in steps if start - 1e-9 <= s <= stop + 1e-9]
    decades = [s for s in inside if abs(s - round(s)) < 1e-9]
    return start, stop, inside if len(decades) < 3 else decades


def fit(values: list[float], axis: Axis, include_zero: bool) -> tuple[float, float, list[float]]:
    lo, hi = min(values), max(values)
    if axis.ticks:
        positions = [t for t, _ in axis.ticks]
        return min(lo, *positions), max(hi, *positions), positions
    if axis.log:
        return log_ticks(lo, hi)
    if axis.time:
        return time_ticks(lo, hi)
    return linear_ticks(min(lo, 0.0) if include_zero else lo, hi)


def tick_label(axis: Axis, position: float) -> str:
    if axis.ticks:
        return dict(axis.ticks)[position]
    if axis.log:
        return axis.fmt(10**position)
    return clock(position) if axis.time else axis.fmt(position)


def esc(text: object) -> str:
    return html.escape(neutral_text(str(text)), quote=True)


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x: Axis | None = None,
    y: Axis | None = None,
    rules: Sequence[Rule] = (),
    bands: Sequence[Band] = (),
    markers: Sequence[Marker] = (),
    cuts: Sequence[Cut] = (),
    whiskers: Sequence[Whisker] = (),
    width: int = 520,
    height: int = 210,
) -> Markup:
    """One chart; an empty one says "no data" rather than drawing nothing. Bands
    are drawn under the lines, whiskers and markers over them; the axes hold
    every line, band, whisker and marker."""
    x, y = x or Axis(), y or Axis()
    frame = Frame(width, height)
    tx, ty = axis_units(x), axis_units(y)
    lines = [(s, in_axis_units(s, tx, ty, width)) for s in series]
    xs, ys = extents(lines, rules, bands, markers, whiskers, tx, ty)
    head = (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>'
        f'<text x="{frame.left}" y="14" class="ct">{esc(title)}</text>'
    )
    if not xs or not ys:
        middle = f'<text x="{width / 2}" y="{height / 2}" class="nd">no data</text>'
        return Markup(f"{head}{middle}</svg>")
    x_lo, x_hi, x_ticks = fit(xs, x, include_zero=False)
    y_lo, y_hi, y_ticks = fit(ys, y, include_zero=True)
    scales = Scales(tx, ty, frame.px(x_lo, x_hi), frame.py(y_lo, y_hi))
    parts = [head, legend(series, frame.left, width), grid(frame, scales, x, y, x_ticks, y_ticks)]
    parts += [band(b, scales) for b in bands]
    for index, (s, pts) in enumerate(lines):
        parts.append(path(s, pts, PALETTE[index % len(PALETTE)], scales.px, scales.py))
    parts += [whisker(w, scales) for w in whiskers]
    for m in markers:
        mx, my = tx(m.x), ty(m.y)
        if mx is not None and my is not None:
            parts.append(marker(m, scales.px(mx), scales.py(my)))
    parts += [rule_line(r, frame, scales, (x_lo, x_hi)) for r in rules if ty(r.y) is not None]
    parts += [cut_line(c, frame, scales) for c in cuts if within(tx(c.x), x_lo, x_hi)]
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class Frame:
    """A chart's size and the margins around its plot, in pixels: room for the
    title and legend above, the tick labels left and below."""

    width: int
    height: int
    left: int = 52
    right: int = 24
    top: int = 34
    bottom: int = 30

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def px(self, lo: float, hi: float) -> Callable[[float], float]:
        """Axis units from ``lo`` to ``hi`` onto the plot's width."""
        return lambda v: round(self.left + (v - lo) / ((hi - lo) or 1.0) * self.plot_w, 1)

    def py(self, lo: float, hi: float) -> Callable[[float], float]:
        """Axis units from ``lo`` to ``hi`` onto the plot's height, upwards."""
        return lambda v: round(
            self.top + self.plot_h - (v - lo) / ((hi - lo) or 1.0) * self.plot_h, 1
        )


def axis_units(axis: Axis) -> Callable[[float], float | None]:
    """Data to axis units: log10 on a log axis (None for what it cannot show)."""
    if axis.log:
        return lambda v: math.log10(v) if v > 0 else None
    return lambda v: v


def in_axis_units(
    s: Series,
    tx: Callable[[float], float | None],
    ty: Callable[[float], float | None],
    width: int,
) -> list[tuple[float, float | None]]:
    """A series' points, thinned to the chart's width, in axis units; a point off
    a log x axis is dropped, one off a log y axis breaks the line."""
    pts = [(tx(px), None if py is None else ty(py)) for px, py in thin(s.points, width)]
    return [(px, py) for px, py in pts if px is not None]


def extents(
    lines: Sequence[tuple[Series, list[tuple[float, float | None]]]],
    rules: Sequence[Rule],
    bands: Sequence[Band],
    markers: Sequence[Marker],
    whiskers: Sequence[Whisker],
    tx: Callable[[float], float | None],
    ty: Callable[[float], float | None],
) -> tuple[list[float], list[float]]:
    """Every x and y the axes must hold, in axis units."""
    xs = [px for _, pts in lines for px, _ in pts]
    ys = [py for _, pts in lines for _, py in pts if py is not None]
    ys += [v for v in (ty(r.y) for r in rules) if v is not None]
    ys += [v for b in bands for _, lo, hi in b.points for v in shown((lo, hi), ty)]
    xs += shown([m.x for m in markers], tx)
    ys += shown([m.y for m in markers], ty)
    xs += [v for w in whiskers for v in shown((w.x_low, w.x_high), tx)]
    ys += [v for w in whiskers for v in shown((w.y_low, w.y_high), ty)]
    return xs, ys


def shown(values: Iterable[float | None], to_units: Callable[[float], float | None]) -> list[float]:
    """The values an axis can show, in its units."""
    return [t for v in values if v is not None and (t := to_units(v)) is not None]


def within(value: float | None, lo: float, hi: float) -> bool:
    return value is not None and lo <= value <= hi


def grid(
    frame: Frame, scales: Scales, x: Axis, y: Axis, x_ticks: list[float], y_ticks: list[float]
) -> str:
    """The y grid lines with their labels, the x tick labels, the axis names."""
    px, py = scales.px, scales.py
    parts = [
        f'<line x1="{frame.left}" x2="{frame.width - frame.right}" y1="{py(t)}" y2="{py(t)}" '
        f'class="g"/><text x="{frame.left - 4}" y="{py(t) + 3}" class="yl">'
        f"{esc(tick_label(y, t))}</text>"
        for t in y_ticks
    ]
    parts += [
        f'<text x="{px(t)}" y="{frame.height - frame.bottom + 13}" class="xl">'
        f"{esc(tick_label(x, t))}</text>"
        for t in x_ticks
    ]
    parts.append(
        f'<text x="{frame.width - frame.right}" y="{frame.height - 4}" class="al">'
        f'{esc(x.label)}</text><text x="4" y="{frame.top - 6}" class="al0">{esc(y.label)}</text>'
    )
    return "".join(parts)


def rule_line(r: Rule, frame: Frame, scales: Scales, x_range: tuple[float, float]) -> str:
    """A threshold across the plot, labelled, with a dot where its ``x`` is."""
    ry = scales.ty(r.y)
    assert ry is not None  # the caller draws only rules the axis shows
    y = scales.py(ry)
    label_y = y + 11 if y - frame.top < 12 else y - 3
    parts = [
        f'<g class="rule"><title>{esc(r.label)}</title>'
        f'<line x1="{frame.left}" x2="{frame.width - frame.right}" y1="{y}" y2="{y}" '
        f'stroke="{RULE_COLOR}" stroke-dasharray="6 3"/>'
        f'<text x="{frame.left + 4}" y="{label_y}" class="rl">{esc(r.label)}</text>'
    ]
    mark_x = None if r.x is None else scales.tx(r.x)
    if within(mark_x, *x_range):
        assert mark_x is not None
        parts.append(f'<circle cx="{scales.px(mark_x)}" cy="{y}" r="3.5" fill="{RULE_COLOR}"/>')
    parts.append("</g>")
    return "".join(parts)


def cut_line(c: Cut, frame: Frame, scales: Scales) -> str:
    """A vertical mark across the plot at ``c.x`` (the caller keeps it in range)."""
    cx = scales.tx(c.x)
    assert cx is not None
    x = scales.px(cx)
    return (
        f'<g class="cut"><title>{esc(c.label)}</title>'
        f'<line x1="{x}" x2="{x}" y1="{frame.top}" y2="{frame.top + frame.plot_h}" '
        f'stroke="{RULE_COLOR}" stroke-dasharray="2 3"/>'
        f'<text x="{x + 3}" y="{frame.top + 10}" class="rl">{esc(c.label)}</text></g>'
    )


def path(
    s: Series,
    pts: list[Point],
    color: str,
    px: Callable[[float], float],
    py: Callable[[float], float],
) -> str:
    """One series as a polyline broken at missing values; a lone point as a dot."""
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for x_value, y_value in pts:
        if y_value is None:
            if current:
                segments.append(current)
            current = []
        else:
            current.append((px(x_value), py(y_value)))
    if current:
        segments.append(current)
    dash = ' stroke-dasharray="5 3"' if s.dashed else ""
    body = []
    for seg in segments:
        if len(seg) == 1:
            body.append(f'<circle cx="{seg[0][0]}" cy="{seg[0][1]}" r="2.5" fill="{color}"/>')
        else:
            d = "M" + "L".join(f"{a},{b}" for a, b in seg)
            body.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>')
    return f"<g><title>{esc(s.name)}</title>{''.join(body)}</g>"


@dataclass(frozen=True)
class Scales:
    """A chart's mappings: data to axis units (``tx``, ``ty``: log10 on a log
    axis, None off it) and axis units to pixels (``px``, ``py``)."""

    tx: Callable[[float], float | None]
    ty: Callable[[float], float | None]
    px: Callable[[float], float]
    py: Callable[[float], float]


def band(b: Band, scales: Scales) -> str:
    """Shaded polygons between the lows and the highs, one per unbroken stretch."""
    tx, ty, px, py = scales.tx, scales.ty, scales.px, scales.py
    stretches: list[list[tuple[float, float, float]]] = [[]]
    for x_value, lo, hi in b.points:
        x, low, high = tx(x_value), None if lo is None else ty(lo), None if hi is None else ty(hi)
        if x is None or low is None or high is None:
            stretches.append([])
        else:
            stretches[-1].append((px(x), py(low), py(high)))
    shapes = []
    for seg in (s for s in stretches if s):
        if len(seg) == 1:
            x, low, high = seg[0]
            shapes.append(f'<line x1="{x}" x2="{x}" y1="{low}" y2="{high}" class="bandline"/>')
            continue
        outline = [(x, high) for x, _, high in seg] + [(x, low) for x, low, _ in reversed(seg)]
        d = "M" + "L".join(f"{x},{y}" for x, y in outline) + "Z"
        shapes.append(f'<path d="{d}" class="band"/>')
    return f"<g><title>{esc(b.name)}</title>{''.join(shapes)}</g>"


def marker_shape(kind: str, x: float, y: float) -> tuple[str, str]:
    """A marker's element and geometry: a triangle for a regression, a diamond
    for a recommendation, a square for the current settings, else a dot."""
    shapes = {
        "regression": (
            "path",
            f'd="M{x},{y - 7:.1f}L{x + 6:.1f},{y + 4:.1f}L{x - 6:.1f},{y + 4:.1f}Z"',
        ),
        "recommended": (
            "path",
            f'd="M{x},{y - 8:.1f}L{x + 8:.1f},{y}L{x},{y + 8:.1f}L{x - 8:.1f},{y}Z"',
        ),
        "current": ("rect", f'x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10"'),
    }
    return shapes.get(kind, ("circle", f'cx="{x}" cy="{y}" r="3"'))


def marker(m: Marker, x: float, y: float) -> str:
    tag, geometry = marker_shape(m.kind, x, y)
    shape = f'<{tag} {geometry} class="mk {esc(m.kind)}"><title>{esc(m.label)}</title></{tag}>'
    if m.tag:
        shape += f'<text x="{x + 7:.1f}" y="{y - 6:.1f}" class="mt">{esc(m.tag)}</text>'
    return f'<a href="{esc(m.href)}">{shape}</a>' if m.href else shape


def whisker(w: Whisker, scales: Scales) -> str:
    """Capped lines from a point to each bound it has; nothing for a point off the axes."""
    tx, ty, px, py = scales.tx, scales.ty, scales.px, scales.py
    cx, cy = tx(w.x), ty(w.y)
    if cx is None or cy is None:
        return ""

    def end(value: float | None, scale: Callable[[float], float | None], at: float) -> float:
        moved = None if value is None else scale(value)
        return at if moved is None else moved

    x, y = px(cx), py(cy)
    lines = []
    for bound in (w.x_low, w.x_high):
        bx = px(end(bound, tx, cx))
        if bx != x:
            lines += [(x, y, bx, y), (bx, y - 3, bx, y + 3)]
    for bound in (w.y_low, w.y_high):
        by = py(end(bound, ty, cy))
        if by != y:
            lines += [(x, y, x, by), (x - 3, by, x + 3, by)]
    body = "".join(f'<line x1="{a}" y1="{b}" x2="{c}" y2="{d}"/>' for a, b, c, d in lines)
    return f'<g class="wk"><title>{esc(w.label)}</title>{body}</g>'


def legend(series: Sequence[Series], left: int, width: int) -> str:
    """Swatches and names on the row under the title, as many as fit."""
    out, x = [], float(left)
    for index, s in enumerate(series):
        name = s.name if len(s.name) <= 32 else s.name[:31] + "…"
        room = 24 + 6.6 * len(name)
        if x + room > width:
            break
        color = PALETTE[index % len(PALETTE)]
        dash = ' stroke-dasharray="4 2"' if s.dashed else ""
        out.append(
            f'<line x1="{x}" x2="{x + 14}" y1="25" y2="25" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
            f'<text x="{x + 18}" y="28" class="lg">{esc(name)}</text>'
        )
        x += room
    return "".join(out)
