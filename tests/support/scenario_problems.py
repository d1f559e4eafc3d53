"""The problems a scenario file is refused for, by key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from slogate import scenarios
from slogate.scenarios import ScenarioError


def problems(path: Path, overrides: dict | None = None) -> dict[str, str]:
    """Key path -> message of every problem ``load`` reports for ``path``."""
    with pytest.raises(ScenarioError) as info:
        scenarios.load(path, overrides)
    for problem in info.value.problems:
        assert problem.file == str(path)
        assert str(path) in str(info.value)
    return {p.path: p.message for p in info.value.problems}
