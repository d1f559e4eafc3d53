"""Jinja2 rendering with autoescape on, and the number formats the pages share.

Every value reaches HTML through autoescape; the only markup not escaped by
Jinja is the SVG that :mod:`slogate.reports.svg` builds, which escapes its own text.
Control and bidi characters in any value (server text is attacker-controlled)
become U+FFFD (:mod:`slogate.analysis.documents.neutral`), so no text can reorder what
the page shows around it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from slogate.analysis.documents.neutral import neutral_text
from slogate.analysis.verdict.slo import FRACTION_METRICS
from slogate.scenarios.metrics import BY_KEY

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import SloEntry

TEMPLATES = Path(__file__).parent / "templates"
DASH = "–"


def num(value: float | None) -> str:
    """About four significant digits, thousands separated; a dash for no value."""
    if value is None:
        return DASH
    magnitude = abs(value)
    if isinstance(value, int) or magnitude >= 1000:
        return f"{value:,.0f}"
    if float(value).is_integer():
        return f"{value:.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 10:
        return f"{value:.2f}"
    return f"{value:.3g}"


def percent(fraction: float | None, digits: int = 2) -> str:
    return DASH if fraction is None else f"{100.0 * fraction:.{digits}f}%"


def size(value: float | None) -> str:
    """Bytes in decimal units (GB from a billion on, else MB), as engines and
    ``slogate plan`` state memory."""
    if value is None:
        return DASH
    return f"{value / 1e9:.2f} GB" if value >= 1e9 else f"{value / 1e6:.0f} MB"


def signed_pct(value: float | None) -> str:
    return DASH if value is None else f"{value:+.1f}%"


def metric_value(value: float | None, metric: str) -> str:
    """A value in its metric's unit: ms, percent or per second."""
    if value is None:
        return DASH
    measured = BY_KEY.get(metric)
    if measured is not None:
        return f"{num(value)} {measured.unit}"
    if metric in FRACTION_METRICS:
        return percent(value, 3)
    return f"{num(value)}/s"


def margin_text(amount: float | None, pct: float | None, metric: str) -> str:
    """An SLO's headroom in its metric's unit (points for fractions) and in percent."""
    if amount is None:
        return DASH
    if metric in FRACTION_METRICS:
        text = f"{100.0 * amount:+.3f} pts"
    else:
        text = ("+" if amount >= 0 else "-") + metric_value(abs(amount), metric)
    return f"{text} ({signed_pct(pct)})"


def margin(slo: SloEntry) -> str:
    """:func:`margin_text` of an SLO entry."""
    return margin_text(slo.margin, slo.margin_pct, slo.metric)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def context_fit(engine: Any) -> str:
    """What the run did with the planned requests longer than the engine's
    context (``run.engine.fit_context``, from ``--fit-context``); empty when
    every planned request fitted or the engine announced no context."""
    fit = engine.get("fit_context") if isinstance(engine, dict) else None
    if not fit:
        return ""
    parts = [
        f"{o['scenario']}: {o['over']} of {o['sampled']} planned requests longer "
        f"({o['clamped']} clamped, {o['dropped']} dropped; the longest "
        f"{o['longest_input']} + {o['longest_output']} tokens)"
        for o in fit["scenarios"]
    ]
    return (
        f"--fit-context {fit['mode']}, the engine's context {engine.get('context')} tokens: "
        + "; ".join(parts)
    )


def neutral(value: Any) -> Any:
    """``value`` neutralised when it is text (Markup stays Markup)."""
    return neutral_text(value) if isinstance(value, str) else value


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=neutral,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=num,
        percent=percent,
        size=size,
        signed_pct=signed_pct,
        metric_value=metric_value,
        margin=margin,
        pretty=pretty,
        context_fit=context_fit,
    )
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
