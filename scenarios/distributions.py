"""Length and think-time distributions, and how a scenario file declares them.

Token lengths drive prefill and decode cost, so they are what a workload most
needs to get right. Each distribution draws floats; ``min``/``max`` clamp every
draw, and integer quantities (tokens, turns) are rounded. ``lognormal`` is given
by its median and p90 because those are the numbers people quote; ``empirical``
resamples a column of a real trace, which keeps its tails exactly.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slogate.scenarios import traces
from slogate.scenarios.errors import quoted
from slogate.scenarios.schema import (
    TEXT,
    Field,
    Reader,
    Shape,
    choice,
    join,
    nested,
    number,
    optional,
    required,
    section_shape,
    tagged_shape,
)

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

Z90 = 1.2815515655446004  # standard normal quantile at 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class Dist(ABC):
    """A distribution with optional clamps; subclasses define ``draw``."""

    min: float | None = None
    max: float | None = None

    @abstractmethod
    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` unclamped draws."""

    @property
    def lower(self) -> float:
        """The smallest value a draw can take (``-inf`` when unbounded)."""
        return -math.inf if self.min is None else self.min

    @property
    def upper(self) -> float:
        """The largest value a draw can take (``inf`` when unbounded)."""
        return math.inf if self.max is None else self.max

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` clamped float draws."""
        return self._clamp(self.draw(rng, size))

    def sample_int(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` clamped draws rounded to integers."""
        import numpy as np

        return self._clamp(np.rint(self.draw(rng, size))).astype(np.int64)

    def _clamp(self, values: np.ndarray) -> np.ndarray:
        import numpy as np

        if self.min is not None:
            values = np.maximum(values, math.ceil(self.min))
        if self.max is not None:
            values = np.minimum(values, math.floor(self.max))
        return values


@dataclass(frozen=True, slots=True, kw_only=True)
class Fixed(Dist):
    value: float

    @property
    def lower(self) -> float:
        return self.value if self.min is None else max(self.value, self.min)

    @property
    def upper(self) -> float:
        return self.value if self.max is None else min(self.value, self.max)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        import numpy as np

        return np.full(size, float(self.value))


@dataclass(frozen=True, slots=True, kw_only=True)
class Uniform(Dist):
    """Uniform on [min, max]; integer draws give each integer equal weight."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.uniform(self.lower, self.upper, size)

    def sample_int(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.integers(math.ceil(self.lower), math.floor(self.upper) + 1, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Normal(Dist):
    mean: float
    std: float

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.normal(self.mean, self.std, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogNormal(Dist):
    median: float
    p90: float

    @property
    def sigma(self) -> float:
        return math.log(self.p90 / self.median) / Z90

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gamma(Dist):
    """Gamma with the given mean and coefficient of variation (std / mean)."""

    mean: float
    cv: float

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, self.mean / shape, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Exponential(Dist):
    mean: float

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Empirical(Dist):
    """Resamples observed values, e.g. a trace's token-length column."""

    source: str
    values: array[float] = field(compare=False, repr=False)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        import numpy as np

        return np.asarray(self.values)[rng.integers(0, len(self.values), size)]

    @property
    def lower(self) -> float:
        bottom = min(self.values)
        return bottom if self.min is None else max(bottom, self.min)

    @property
    def upper(self) -> float:
        top = max(self.values)
        return top if self.max is None else min(top, self.max)


def kind_tables(least: float, most: float) -> dict[str, dict[str, Field]]:
    """Keys each kind of distribution takes; values lie in [``least``, ``most``]."""
    bound = number(ge=least, le=most)
    clamps = {"min": optional(bound), "max": optional(bound)}
    positive = required(number(gt=0, le=most))
    return {
        "fixed": {"value": required(bound)},
        "uniform": {"min": required(bound), "max": required(bound)},
        "normal": {
            "mean": required(number(le=most)),
            "std": required(number(ge=0, le=most)),
            **clamps,
        },
        "lognormal": {"median": positive, "p90": positive, **clamps},
        "gamma": {"mean": positive, "cv": positive, **clamps},
        "exponential": {"mean": positive, **clamps},
        "empirical": {
            "file": required(TEXT),
            "column": required(TEXT),
            "format": optional(choice(*traces.FORMATS), "auto"),
            **clamps,
        },
    }


KINDS = tuple(kind_tables(0, 1))


def dist_shape(least: float, most: float) -> Shape:
    """The JSON Schema of what ``read_dist`` reads: a number or a tagged mapping."""
    kinds = {
        kind: section_shape({"dist": required(choice(kind)), **fields})
        for kind, fields in kind_tables(least, most).items()
    }
    return {"anyOf": [number(ge=least, le=most).shape, tagged_shape("dist", kinds)]}


def dist_field(least: float, most: float, default: Any = None) -> Field:
    """A distribution field with values in [``least``, ``most``]; ``default`` as
    a file writes it."""
    reader = functools.partial(read_dist, least=least, most=most)
    return nested(reader, dist_shape(least, most), default)


def read_dist(reader: Reader, value: Any, path: str, *, least: float, most: float) -> Dist | None:
    """Build a distribution from its mapping (or a bare number meaning ``fixed``).

    ``least`` is the smallest meaningful value (1 for tokens, 0 for seconds) and
    ``most`` the largest allowed (scenarios/limits.py); they are also the default
    clamps, so no draw falls outside them.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"dist": "fixed", "value": value}
    kind_check = choice(*KINDS)
    if not isinstance(value, dict) or value.get("dist") not in KINDS:
        got = value.get("dist") if isinstance(value, dict) else value
        reader.problem(
            join(path, "dist") if isinstance(value, dict) else path,
            f"expected a number or a mapping with dist: one of {', '.join(KINDS)}, "
            f"got {quoted(got)}",
        )
        return None
    kind = value["dist"]
    fields = {"dist": required(kind_check), **kind_tables(least, most)[kind]}
    f = reader.section(value, path, fields)
    if f is None:
        return None
    f.pop("dist")
    if kind not in ("uniform", "fixed"):
        if f.get("min") is None:
            f["min"] = least
        if f.get("max") is None:
            f["max"] = most
    return _build(reader, kind, f, path)


def _build(reader: Reader, kind: str, f: dict[str, Any], path: str) -> Dist | None:
    if f.get("max") is not None and f["min"] > f["max"]:
        reader.problem(
            join(path, "max"), f"expected a number >= min ({f['min']:g}), got {f['max']:g}"
        )
        return None
    if kind == "lognormal" and f["p90"] <= f["median"]:
        reader.problem(
            join(path, "p90"),
            f"expected a number greater than median ({f['median']:g}), got {f['p90']:g}",
        )
        return None
    if kind == "empirical":
        return _empirical(reader, f, path)
    classes: dict[str, type[Dist]] = {
        "fixed": Fixed,
        "uniform": Uniform,
        "normal": Normal,
        "lognormal": LogNormal,
        "gamma": Gamma,
        "exponential": Exponential,
    }
    return classes[kind](**f)


def _empirical(reader: Reader, f: dict[str, Any], path: str) -> Empirical | None:
    try:
        file = traces.resolve(f["file"], reader.base_dir)
        values = traces.read_numbers(file, f["column"], f["format"])
    except traces.TraceError as exc:
        reader.problem(join(path, "file" if exc.key == "file" else exc.key), str(exc))
        return None
    return Empirical(min=f["min"], max=f["max"], source=f"{file.name}:{f['column']}", values=values)
