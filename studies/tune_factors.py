"""A tune's factors, their levels and the treatments they make.

Factors come from ``--set name=v1,v2`` (repeatable) or a YAML file::

    factors:
      max_num_seqs: [8, 16, 32]
      max_num_batched_tokens: [2048, 4096, 8192]
      enable_prefix_caching: [true, false]
    linked:                      # level i of each moves together
      - [max_num_seqs, max_num_batched_tokens]
    exclude:                     # treatments matching every key are not run
      - {max_num_seqs: 32, enable_prefix_caching: false}

Levels are kept as text (``true``, not ``True``): each engine coerces its own
settings, and the recommendation repeats them as the user wrote them. The
treatments are the full factorial of the unlinked factors and the linked
groups, minus the exclusions.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Settings = dict[str, str]


@dataclass(frozen=True)
class Factor:
    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class FactorSpace:
    """The factors, the groups that move together and the combinations left out."""

    factors: tuple[Factor, ...]
    linked: tuple[tuple[str, ...], ...] = ()
    exclusions: tuple[Mapping[str, str], ...] = field(default_factory=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    def merged(self, other: FactorSpace) -> FactorSpace:
        """This space with ``other``'s factors added (``--set`` beside ``--factors``)."""
        return validated(
            FactorSpace(
                self.factors + other.factors,
                self.linked + other.linked,
                self.exclusions + other.exclusions,
            ),
            "factors",
        )


@dataclass(frozen=True)
class Treatment:
    """One combination of levels; ``current``: the settings the engine runs today."""

    settings: Settings
    current: bool = False

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.settings.items())

    def folder(self, index: int) -> str:
        """Its folder under the tune's: numbered in run order, named by its settings."""
        return f"{index:02d}-" + re.sub(r"[^A-Za-z0-9._=-]+", "_", self.name.replace(",", "_"))


def level_text(value: Any) -> str:
    """A YAML or CLI level as text: booleans lower-case, as engines' flags take them."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_set(items: Sequence[str]) -> FactorSpace:
    """``--set name=v1,v2`` (repeatable) as factors; ValueError naming the bad one."""
    factors = []
    for item in items:
        name, sep, text = item.partition("=")
        levels = tuple(v.strip() for v in text.split(",") if v.strip())
        if not sep or not name.strip() or not levels:
            raise ValueError(f"--set {item!r}: expected NAME=LEVEL[,LEVEL...]")
        factors.append(Factor(name.strip(), levels))
    return validated(FactorSpace(tuple(factors)), "--set")


def parse_assignments(items: Sequence[str], flag: str) -> Settings:
    """``--current name=value`` (repeatable) as settings."""
    settings: Settings = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"{flag} {item!r}: expected NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


LEVEL_SCHEMA: dict[str, Any] = {"type": ["string", "number", "boolean"]}


def factors_schema() -> dict[str, Any]:
    """The factors file's JSON Schema (``slogate schema tune-factors``), for
    editors: the same shape :func:`read_factors` accepts, whose own checks
    (names of linked and excluded factors, equal level counts) go further."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "slogate tune factors",
        "type": "object",
        "additionalProperties": False,
        "required": ["factors"],
        "properties": {
            "factors": {
                "description": "each factor's levels: the engine setting's values to try",
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {"type": "array", "minItems": 1, "items": LEVEL_SCHEMA},
            },
            "linked": {
                "description": "groups of factors whose i-th levels move together",
                "type": "array",
                "items": {"type": "array", "minItems": 2, "items": {"type": "string"}},
            },
            "exclude": {
                "description": "treatments matching every key of one entry are not run",
                "type": "array",
                "items": {
                    "type": "object",
                    "minProperties": 1,
                    "additionalProperties": LEVEL_SCHEMA,
                },
            },
        },
    }


def read_factors(path: Path) -> FactorSpace:
    """A factors file; ValueError naming the file and the key that is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {error}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with 'factors'")
    unknown = sorted(set(data) - {"factors", "linked", "exclude"})
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r}; known: factors, linked, exclude")
    raw = data.get("factors")
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{path}: factors: expected a mapping of names to lists of levels")
    factors = []
    for name, levels in raw.items():
        if (
            not isinstance(levels, list)
            or not levels
            or any(isinstance(v, (list, dict)) or v is None for v in levels)
        ):
            raise ValueError(f"{path}: factors.{name}: expected a list of levels")
        factors.append(Factor(str(name), tuple(level_text(v) for v in levels)))
    linked = data.get("linked") or []
    if not isinstance(linked, list) or not all(isinstance(g, list) and len(g) > 1 for g in linked):
        raise ValueError(f"{path}: linked: expected a list of lists of two or more factor names")
    exclude = data.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        raise ValueError(f"{path}: exclude: expected a list of mappings of factor to level")
    space = FactorSpace(
        tuple(factors),
        tuple(tuple(str(n) for n in group) for group in linked),
        tuple({str(k): level_text(v) for k, v in e.items()} for e in exclude),
    )
    return validated(space, str(path))


def validated(space: FactorSpace, where: str) -> FactorSpace:
    """``space`` when its names and levels hold together; ValueError naming what does not."""
    by_name: dict[str, Factor] = {}
    for factor in space.factors:
        if factor.name in by_name:
            raise ValueError(f"{where}: factor {factor.name!r} given twice")
        if len(set(factor.levels)) != len(factor.levels):
            raise ValueError(f"{where}: factors.{factor.name}: a level is given twice")
        by_name[factor.name] = factor
    grouped: set[str] = set()
    for index, group in enumerate(space.linked):
        for name in group:
            if name not in by_name:
                raise ValueError(f"{where}: linked.{index}: {name!r} is not a factor")
            if name in grouped:
                raise ValueError(f"{where}: linked.{index}: {name!r} is in two linked groups")
            grouped.add(name)
        counts = {len(by_name[n].levels) for n in group}
        if len(counts) > 1:
            raise ValueError(
                f"{where}: linked.{index}: {', '.join(group)} move together, so they need "
                "the same number of levels"
            )
    for index, exclusion in enumerate(space.exclusions):
        for name, level in exclusion.items():
            if name not in by_name:
                raise ValueError(f"{where}: exclude.{index}: {name!r} is not a factor")
            if level not in by_name[name].levels:
                raise ValueError(
                    f"{where}: exclude.{index}.{name}: {level!r} is not one of its levels"
                )
    return space


def treatments(space: FactorSpace) -> list[Treatment]:
    """Every combination of levels (linked factors moving together), in the
    factors' order, minus the exclusions."""
    by_name = {f.name: f for f in space.factors}
    grouped = {name for group in space.linked for name in group}
    groups = [*space.linked, *((f.name,) for f in space.factors if f.name not in grouped)]
    choices = [
        [
            {name: by_name[name].levels[i] for name in group}
            for i in range(len(by_name[group[0]].levels))
        ]
        for group in groups
    ]
    result = []
    for combination in itertools.product(*choices):
        merged = {k: v for part in combination for k, v in part.items()}
        settings = {name: merged[name] for name in space.names}
        if not any(all(settings[k] == v for k, v in e.items()) for e in space.exclusions):
            result.append(Treatment(settings))
    return result


def current_settings(
    names: Sequence[str], defaults: Mapping[str, str], given: Mapping[str, str]
) -> Settings:
    """The settings the engine runs today, for each factor: ``--current``, else
    the engine's default; ValueError naming a factor neither gives."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"--current {unknown[0]}: not one of the factors ({', '.join(names)})")
    settings = {}
    for name in names:
        value = given.get(name, defaults.get(name))
        if value is None:
            raise ValueError(
                f"--current {name}=VALUE needed: the engine does not say its default for {name!r}"
            )
        settings[name] = value
    return settings


def with_current(grid: list[Treatment], current: Settings) -> list[Treatment]:
    """The grid with the current settings marked, or added first when the grid lacks them."""
    if any(t.settings == current for t in grid):
        return [Treatment(t.settings, t.settings == current) for t in grid]
    return [Treatment(current, True), *grid]
