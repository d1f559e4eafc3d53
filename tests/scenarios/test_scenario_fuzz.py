"""The scenario loader under 1,000 generated files (hypothesis): a valid scenario
with values replaced at random key paths, and raw text. ``slogate scenario
check`` answers 0 or 2 for every one: never 3 (an unexpected exception), never
a traceback."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slogate.cli import main

ROOT = Path(__file__).resolve().parents[2]
VALID = yaml.safe_load((ROOT / "tests" / "data" / "exact-chat.yaml").read_text())
PATHS = [
    ("name",),
    ("api",),
    ("seed",),
    ("workload",),
    ("workload", "kind"),
    ("workload", "input_tokens"),
    ("workload", "output_tokens"),
    ("workload", "turns"),
    ("workload", "think_time_s"),
    ("workload", "system"),
    ("load",),
    ("load", "users"),
    ("load", "spawn_rate"),
    ("load", "rate"),
    ("load", "duration"),
    ("load", "warmup"),
    ("load", "stages"),
    ("request",),
    ("request", "extra_body"),
    ("request", "api_key_env"),
    ("timeouts", "stall"),
    ("slo",),
    ("slo", "ttft_ms"),
    ("slo", "error_rate"),
    ("slo", "goodput"),
    ("scenarios",),
]
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["chat", "rag", "code", "trace", "lognormal", "5s", "1e9", "-1", "p99"])
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["dist", "median", "p90", "max", "min", "value", "rps", "p99", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


def mutated(changes: list[tuple[tuple[str, ...], Any]]) -> dict:
    doc = yaml.safe_load(yaml.safe_dump(VALID))
    for path, value in changes:
        node = doc
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
    return doc


def check_code(text: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["scenario", "check", str(path)])
    return code, err.getvalue()


@pytest.mark.slow
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=4))
def test_generated_scenarios_are_accepted_or_refused_never_crash(changes: list) -> None:
    code, err = check_code(yaml.safe_dump(mutated(changes), allow_unicode=True))
    assert code in (0, 2), err
    assert "Traceback" not in err


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_as_a_scenario_file_is_accepted_or_refused(text: str) -> None:
    code, err = check_code(text)
    assert code in (0, 2), err
