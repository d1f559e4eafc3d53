"""What to send: scenario files (workload, load shape, SLOs), their validation,
prompt and length synthesis, and trace replay.

Knows nothing of Locust, HTTP or reports. The load side calls ``load`` and
drives one ``Planner`` per user or worker; the CLI uses ``load`` and
``sample_requests`` for ``slogate scenario check`` and ``sample``.

The names below are imported on first use (PEP 562), not with the package: a
module that needs only ``slogate.scenarios.units`` or ``.limits`` (every
command line's argparse types) must not pay for numpy, PIL and the tokenizer,
or ``slogate --help`` takes a second to answer.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Each public name and the module that defines it.
_HOMES = {
    "DatasetReport": "datasets",
    "Problem": "errors",
    "ScenarioError": "errors",
    "BUILTINS": "loader",
    "load": "loader",
    **dict.fromkeys(
        (
            "Conversation",
            "GoodputSpec",
            "LoadSpec",
            "PlannedTurn",
            "RateSpec",
            "RequestOptions",
            "Scenario",
            "SloSpec",
            "Stage",
            "Threshold",
            "Timeouts",
        ),
        "model",
    ),
    "Planner": "planner",
    "output_token_counter": "prompt_text",
    "sample_requests": "sample_view",
    "parse_duration": "units",
    "dataset_report": "workloads",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)
