"""What to send: scenario files (workload, load shape, SLOs), their validation,
prompt and length synthesis, and trace replay.

Knows nothing of Locust, HTTP or reports. The load side calls ``load`` and
drives one ``Planner`` per user or worker; the CLI uses ``load`` and
``sample_requests`` for ``slogate scenario check`` and ``sample``.
"""

from slogate.scenarios.datasets import DatasetReport
from slogate.scenarios.errors import Problem, ScenarioError
from slogate.scenarios.loader import BUILTINS, load
from slogate.scenarios.model import (
    Conversation,
    GoodputSpec,
    LoadSpec,
    PlannedTurn,
    RateSpec,
    RequestOptions,
    Scenario,
    SloSpec,
    Stage,
    Threshold,
    Timeouts,
)
from slogate.scenarios.planner import Planner
from slogate.scenarios.prompt_text import output_token_counter
from slogate.scenarios.sample_view import sample_requests
from slogate.scenarios.units import parse_duration
from slogate.scenarios.workloads import dataset_report

__all__ = [
    "BUILTINS",
    "Conversation",
    "DatasetReport",
    "GoodputSpec",
    "LoadSpec",
    "PlannedTurn",
    "Planner",
    "Problem",
    "RateSpec",
    "RequestOptions",
    "Scenario",
    "ScenarioError",
    "SloSpec",
    "Stage",
    "Threshold",
    "Timeouts",
    "dataset_report",
    "load",
    "output_token_counter",
    "parse_duration",
    "sample_requests",
]
