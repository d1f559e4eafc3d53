"""`slogate --help` and `slogate scenario check` answer without importing the
load generator, the engines or the reports (bench/bench_startup.py times them);
every subcommand declared by its own module still parses and runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slogate.cli import DEFERRED, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
# What the load, the engines and the reports need; never the command line itself.
HEAVY = {"locust", "gevent", "aiohttp", "jinja2", "pydantic", "scipy", "flask"}
# What loading a scenario needs, but not the command line.
SCENARIO_SIDE = {"numpy", "tokenizers", "yaml", "PIL"}
PROBE = """import sys
from slogate.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def top_level_imports(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    return set(done.stderr.splitlines()[-1].split())


def test_help_imports_nothing_heavy_and_no_subcommand_module() -> None:
    imported = top_level_imports("--help")
    assert imported & (HEAVY | SCENARIO_SIDE) == set()
    probe = subprocess.run(
        [sys.executable, "-c", PROBE.replace('name.split(".")[0]', "name"), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert "capacity" in probe.stdout and "sweep" in probe.stdout  # listed, with their help
    assert "slogate.sweep_cmd" not in probe.stderr


def test_scenario_check_loads_the_scenario_without_the_load_side() -> None:
    assert top_level_imports("scenario", "check", "scenarios/chat.yaml") & HEAVY == set()


@pytest.mark.parametrize("scenario", ["chat", "rag", "mixed", "vision"])
def test_scenario_check_imports_no_numpy_where_it_makes_no_request(scenario: str) -> None:
    # numpy is a tenth of a second of start-up; its modules import it where they make requests
    imported = top_level_imports("scenario", "check", f"scenarios/{scenario}.yaml")
    assert "numpy" not in imported


@pytest.mark.parametrize("name", sorted(DEFERRED))
def test_each_deferred_subcommand_declares_its_arguments(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser(name).parse_args([name, "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: slogate {name}") and "options:" in out


def test_a_deferred_subcommand_runs_its_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", str(tmp_path)]) == 2
    assert "give --keep N, --older-than AGE or both" in capsys.readouterr().err
