"""What a data file gave a scenario: how many rows (or conversations) were
read and used, which were skipped and why, and the percentiles of their
lengths, for ``slogate scenario check`` to print before any load is sent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np


QUANTILES = (50, 90, 99)


@dataclass(frozen=True, slots=True)
class Lengths:
    """Percentiles of one length (tokens, turns) over the used rows."""

    name: str
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, name: str, values: np.ndarray) -> Lengths:
        # observed values (no interpolation), as a user would look them up in the file
        import numpy as np

        p50, p90, p99 = (
            np.percentile(values, QUANTILES, method="inverted_cdf") if len(values) else (0, 0, 0)
        )
        return cls(name, float(p50), float(p90), float(p99), float(np.max(values, initial=0)))

    def line(self) -> str:
        return (
            f"{self.name:<15} p50 {self.p50:>7g}  p90 {self.p90:>7g}  "
            f"p99 {self.p99:>7g}  max {self.max:>7g}"
        )


@dataclass(frozen=True, slots=True)
class DatasetReport:
    """``read`` units (rows or conversations) came from ``source``; ``skipped``
    maps each reason to how many were left out; ``notes`` say what else a
    user should know (no time column, turns dropped, the trace's rate)."""

    source: str
    unit: str
    read: int
    skipped: Mapping[str, int]
    lengths: tuple[Lengths, ...]
    notes: tuple[str, ...] = ()

    @property
    def used(self) -> int:
        return self.read - sum(self.skipped.values())

    def lines(self) -> list[str]:
        """The report as indented text lines."""
        skipped = sum(self.skipped.values())
        out = [f"{self.source}: {self.read} {self.unit} read, {self.used} used, {skipped} skipped"]
        out += [f"  skipped {n}: {why}" for why, n in self.skipped.items() if n]
        out += ["  " + lengths.line() for lengths in self.lengths]
        out += [f"  {note}" for note in self.notes]
        return out
