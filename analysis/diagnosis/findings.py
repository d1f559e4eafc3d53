"""A diagnosed cause: what the data shows, the numbers, and what to do about it.

Every diagnosis path (``slogate.analysis.diagnosis.diagnose`` on the histograms and the
engine's gauges, ``slogate.analysis.diagnosis.causes`` on the requests' timelines)
returns these, so the report, summary.json and summary.md render one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slogate.analysis.diagnosis.remedies import Remedy


@dataclass(frozen=True)
class Finding:
    """One diagnosed cause. ``metrics`` are the SLO metrics it can explain;
    ``explains`` the failed SLOs of the run among them; ``evidence`` the numbers
    the text quotes, by name, so a report or a test can use them directly.

    ``share`` (0..1, by SLO metric) is how much of each failed SLO's miss the
    cause accounts for, where the requests' timelines let it be measured: the
    findings are ranked by it. ``confirmation`` is what the engine's own
    metrics say (``agree``, ``disagree`` or ``absent``) and ``engine_text``
    their numbers; ``action`` the engine setting to try and the experiment
    that tests it, and ``remedies`` that setting as a tune varies it."""

    cause: str
    text: str
    evidence: dict[str, Any]
    metrics: tuple[str, ...]
    scenario: str | None = None
    explains: tuple[str, ...] = field(default=())
    share: dict[str, float] = field(default_factory=dict)
    confirmation: str | None = None
    engine_text: str = ""
    action: str = ""
    remedies: tuple[Remedy, ...] = field(default=())
