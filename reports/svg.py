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
from collections.abc import Callable, Sequence
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
    left, right, top, bottom = 52, 24, 34, 30
    tx = (lambda v: math.log10(v) if v > 0 else None) if x.log else (lambda v: v)
    ty = (lambda v: math.log10(v) if v > 0 else None) if y.log else (lambda v: v)
    lines = []
    for s in series:
        pts = [(tx(px), None if py is None else ty(py)) for px, py in thin(s.points, width)]
        lines.append((s, [(px, py) for px, py in pts if px is not None]))
    xs = [px for _, pts in lines for px, _ in pts]
    ys = [py for _, pts in lines for _, py in pts if py is not None]
    ys += [v for v in (ty(r.y) for r in rules) if v is not None]
    ys += [
        t
        for b in bands
        for _, lo, hi in b.points
        for v in (lo, hi)
        if v is not None and (t := ty(v)) is not None
    ]
    xs += [t for m in markers if (t := tx(m.x)) is not None]
    ys += [t for m in markers if (t := ty(m.y)) is not None]
    xs += [
        t
        for w in whiskers
        for v in (w.x_low, w.x_high)
        if v is not None and (t := tx(v)) is not None
    ]
    ys += [
        t
        for w in whiskers
        for v in (w.y_low, w.y_high)
        if v is not None and (t := ty(v)) is not None
    ]
    head = (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>'
        f'<text x="{left}" y="14" class="ct">{esc(title)}</text>'
    )
    if not xs or not ys:
        middle = f'<text x="{width / 2}" y="{height / 2}" class="nd">no data</text>'
        return Markup(f"{head}{middle}</svg>")
    x_lo, x_hi, x_ticks = fit(xs, x, include_zero=False)
    y_lo, y_hi, y_ticks = fit(ys, y, include_zero=True)
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return round(left + (v - x_lo) / ((x_hi - x_lo) or 1.0) * plot_w, 1)

    def py(v: float) -> float:
        return round(top + plot_h - (v - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h, 1)

    parts = [head, legend(series, left, width)]
    for t in y_ticks:
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{py(t)}" y2="{py(t)}" class="g"/>'
            f'<text x="{left - 4}" y="{py(t) + 3}" class="yl">{esc(tick_label(y, t))}</text>'
        )
    for t in x_ticks:
        parts.append(
            f'<text x="{px(t)}" y="{height - bottom + 13}" class="xl">'
            f"{esc(tick_label(x, t))}</text>"
        )
    parts.append(
        f'<text x="{width - right}" y="{height - 4}" class="al">{esc(x.label)}</text>'
        f'<text x="4" y="{top - 6}" class="al0">{esc(y.label)}</text>'
    )
    scales = Scales(tx, ty, px, py)
    parts += [band(b, scales) for b in bands]
    for index, (s, pts) in enumerate(lines):
        color = PALETTE[index % len(PALETTE)]
        parts.append(path(s, pts, color, px, py))
    parts += [whisker(w, scales) for w in whiskers]
    for m in markers:
        mx, my = tx(m.x), ty(m.y)
        if mx is not None and my is not None:
            parts.append(marker(m, px(mx), py(my)))
    for r in rules:
        ry = ty(r.y)
        if ry is None:
            continue
        label_y = py(ry) + 11 if py(ry) - top < 12 else py(ry) - 3
        parts.append(
            f'<g class="rule"><title>{esc(r.label)}</title>'
            f'<line x1="{left}" x2="{width - right}" y1="{py(ry)}" y2="{py(ry)}" '
            f'stroke="{RULE_COLOR}" stroke-dasharray="6 3"/>'
            f'<text x="{left + 4}" y="{label_y}" class="rl">{esc(r.label)}</text>'
        )
        mark_x = None if r.x is None else tx(r.x)
        if mark_x is not None and x_lo <= mark_x <= x_hi:
            parts.append(f'<circle cx="{px(mark_x)}" cy="{py(ry)}" r="3.5" fill="{RULE_COLOR}"/>')
        parts.append("</g>")
    for c in cuts:
        cx = tx(c.x)
        if cx is not None and x_lo <= cx <= x_hi:
            parts.append(
                f'<g class="cut"><title>{esc(c.label)}</title>'
                f'<line x1="{px(cx)}" x2="{px(cx)}" y1="{top}" y2="{top + plot_h}" '
                f'stroke="{RULE_COLOR}" stroke-dasharray="2 3"/>'
                f'<text x="{px(cx) + 3}" y="{top + 10}" class="rl">{esc(c.label)}</text></g>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


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
