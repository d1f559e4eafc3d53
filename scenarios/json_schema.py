"""The JSON Schema of scenario and mix files (``slogate schema scenario``),
for editors and CI linters. It is built from the field tables the loader reads
with (each check and nested section carries its fragment), so the two cannot
drift apart. What JSON Schema cannot say stays the loader's alone: checks across
keys, files that must exist or load, YAML's own limits; docs/scenarios.md lists
them."""

from __future__ import annotations

from typing import Any

from slogate.scenarios.loader import MIX_FIELDS, SCENARIO_FIELDS
from slogate.scenarios.schema import section_shape

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def scenario_schema() -> dict[str, Any]:
    """A file with a ``scenarios:`` list is a mix, as the loader decides; any
    other mapping is one scenario."""
    return {
        "$schema": DRAFT,
        "title": "slogate scenario or mix file",
        "description": "A scenario (workload, load, SLOs) or a mix of scenario files "
        "run together under one load; `slogate scenario check FILE` checks the rest.",
        "type": "object",
        "if": {"required": ["scenarios"]},
        "then": section_shape(MIX_FIELDS),
        "else": section_shape(SCENARIO_FIELDS),
    }
