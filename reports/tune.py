"""A tune's page and CSV: tune.html (the Pareto chart of the treatments, the
ranked table, the recommendation and the verdict against the current
settings) and treatments.csv, from tune.json read through its contract.

Everything shown is what the tune decided (ranks, the Pareto front, the
verdicts against the current settings); this module only draws it. A point's
whisker is its capacity interval [highest pass, lowest fail] carried to
throughput per GPU in proportion to the load: under every SLO the engine
emits the tokens it is sent, so its output rate scales with the load it
serves. Throughput per user is the confirmation trial's, with no interval of
its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from slogate.analysis.documents.contracts import Tune, TuneTreatment, as_model
from slogate.reports.html import render
from slogate.reports.results import write_atomic
from slogate.reports.study_lines import (
    by_rank,
    settings_text,
    spelled,
    tune_capacity_text,
    tune_spending_lines,
    tune_verdict_lines,
)
from slogate.reports.svg import Axis, Marker, Series, Whisker, line_chart
from slogate.reports.tables import to_csv


def inside(path: str | None) -> str | None:
    """The link to ``path`` when it lies inside the tune's folder (relative, no
    ``..``), else None: a page must not send its reader anywhere else. The path
    is percent-encoded, so a browser reads every character as part of a file's
    name (a ``#``, ``%``, ``:`` or ``\\`` cannot start a fragment, a scheme or
    a climb out of the folder)."""
    if not path or path.startswith("/") or ".." in PurePosixPath(path).parts:
        return None
    return quote(path)


@dataclass(frozen=True)
class Plane:
    """What the Pareto chart plots on y: output tokens/s per GPU when the tune
    knows the GPUs, else the whole engine's; ``axis`` is short, as the y axis
    has only a corner for its label."""

    per_gpu: bool

    @property
    def axis(self) -> str:
        return "per GPU" if self.per_gpu else "engine"

    @property
    def whose(self) -> str:
        return "per GPU" if self.per_gpu else "of the engine"

    @property
    def label(self) -> str:
        return f"output tokens/s {self.whose}"

    def y(self, t: TuneTreatment) -> float | None:
        if t.throughput is None:
            return None
        return t.throughput.per_gpu if self.per_gpu else t.throughput.output_tokens_per_s


def plane_of(doc: Tune) -> Plane:
    return Plane(any(t.throughput and t.throughput.per_gpu is not None for t in doc.treatments))


def drawn(doc: Tune, plane: Plane) -> list[tuple[TuneTreatment, float, float]]:
    """The measured treatments with both throughputs at their capacity: (treatment, x, y)."""
    points = []
    for t in doc.treatments:
        x = None if t.throughput is None else t.throughput.per_user
        y = plane.y(t)
        if t.status == "measured" and x is not None and y is not None:
            points.append((t, x, y))
    return points


def capacity_whisker(t: TuneTreatment, x: float, y: float) -> Whisker:
    """The capacity interval as a range of throughput per GPU (module docstring)."""
    c = t.capacity
    label = f"{t.name}: capacity {tune_capacity_text(c)}"
    if c is None or not c.value:
        return Whisker(x, y, None, None, None, None, label)
    scale = y / c.value
    low = None if c.lower is None else c.lower * scale
    high = None if c.upper is None else c.upper * scale
    return Whisker(x, y, None, None, low, high, label)


def kind_of(doc: Tune, t: TuneTreatment) -> str:
    if doc.recommended is not None and t.name == doc.recommended.treatment:
        return "recommended"
    if t.current:
        return "current"
    return "front" if t.pareto else "dominated"


def pareto_chart(doc: Tune) -> Markup:
    """Throughput per GPU against throughput per user at each treatment's
    capacity: whiskers, the front as a line, the recommendation and the current
    settings marked; each point links to its treatment's report."""
    plane = plane_of(doc)
    points = drawn(doc, plane)
    front = sorted((x, y) for t, x, y in points if t.pareto)
    markers = [
        Marker(x, y, kind_of(doc, t), f"{t.name}: {settings_text(t.settings)}",
               inside(t.report), tag=str(t.rank or ""))
        for t, x, y in points
    ]  # fmt: skip
    markers += [
        Marker(x, y, "current", f"{t.name}: the current settings")
        for t, x, y in points
        if t.current and kind_of(doc, t) == "recommended"
    ]
    return line_chart(
        [Series("Pareto front", front)],
        title=f"Output tokens/s {plane.whose} against per user, at each treatment's SLO capacity",
        x=Axis("output tokens/s per user"),
        y=Axis(plane.axis),
        markers=markers,
        whiskers=[capacity_whisker(t, x, y) for t, x, y in points],
        width=760,
        height=400,
    )


# -- CSV -----------------------------------------------------------------------------
COLUMNS = [
    "rank",
    "name",
    "status",
    "current",
    "recommended",
    "pareto",
    "vs_current",
    "capacity",
    "capacity_lower",
    "capacity_upper",
    "unit",
    "limiting_slo",
    "meets_target",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_user",
    "startup_s",
    "peak_memory_bytes",
    "engine_time_s",
    "screening_lower",
    "screening_upper",
    "pruned_reason",
    "error",
    "report",
]


def setting_columns(doc: Tune) -> list[str]:
    """One column per setting, ``set:NAME``, in the order the factors were given."""
    seen = dict.fromkeys(f.name for f in doc.factors)
    for t in doc.treatments:
        seen.update(dict.fromkeys(t.settings))
    return [f"set:{name}" for name in seen]


def treatment_row(doc: Tune, t: TuneTreatment) -> dict[str, Any]:
    c, tp, sc = t.capacity, t.throughput, t.screening
    return {
        "rank": t.rank,
        "name": t.name,
        "status": t.status,
        "current": t.current,
        "recommended": kind_of(doc, t) == "recommended",
        "pareto": t.pareto,
        "vs_current": t.vs_current,
        "capacity": None if c is None else c.value,
        "capacity_lower": None if c is None else c.lower,
        "capacity_upper": None if c is None else c.upper,
        "unit": None if c is None else c.unit,
        "limiting_slo": None if c is None else c.limiting_slo,
        "meets_target": t.meets_target,
        "output_tokens_per_s": None if tp is None else tp.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": None if tp is None else tp.per_gpu,
        "output_tokens_per_s_per_user": None if tp is None else tp.per_user,
        "startup_s": t.startup_s,
        "peak_memory_bytes": t.peak_memory_bytes,
        "engine_time_s": t.engine_time_s,
        "screening_lower": None if sc is None else sc.lower,
        "screening_upper": None if sc is None else sc.upper,
        "pruned_reason": t.pruned_reason,
        "error": t.error,
        "report": t.report,
        **{f"set:{name}": value for name, value in t.settings.items()},
    }


def treatments_csv(doc: Tune) -> str:
    """Every treatment, ranked first: a flat table for spreadsheets."""
    rows = (treatment_row(doc, t) for t in by_rank(doc.treatments))
    return to_csv([*COLUMNS, *setting_columns(doc)], rows)


# -- page ----------------------------------------------------------------------------
def write_tune(out: Path, doc: Tune | Mapping[str, Any]) -> dict[str, Path]:
    """tune.html and treatments.csv of a tune document, read through its contract."""
    tune = as_model(Tune, doc, str(out / "tune.json"))
    out.mkdir(parents=True, exist_ok=True)
    recommended = next((t for t in tune.treatments if kind_of(tune, t) == "recommended"), None)
    page = render(
        "tune.html.j2",
        d=tune,
        chart=pareto_chart(tune),
        plane=plane_of(tune),
        ranked=by_rank(t for t in tune.treatments if t.status == "measured"),
        recommended=recommended,
        verdict_lines=tune_verdict_lines(tune),
        spending_lines=tune_spending_lines(tune),
        named=all(spelled(t) for t in tune.treatments),
        settings_text=settings_text,
        capacity_text=tune_capacity_text,
        inside=inside,
    )
    return {
        "report": write_atomic(out / "tune.html", page),
        "treatments": write_atomic(out / "treatments.csv", treatments_csv(tune)),
    }
