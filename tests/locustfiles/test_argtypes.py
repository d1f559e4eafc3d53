"""Every command's argument types come from one place (locustfiles/argtypes.py),
so a value no command can use stops each of them alike: exit 2, naming the flag."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from slogate.cli import build_parser, main
from slogate.locustfiles import argtypes


def parsers(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_every_typed_flag_of_every_command_takes_its_type_from_argtypes() -> None:
    typed = {
        f"{name} {'/'.join(action.option_strings) or action.dest}": action.type
        for name, parser in parsers(build_parser(), "slogate")
        for action in parser._actions
        if action.type is not None
    }
    assert "slogate plan --context" in typed and "slogate prune --older-than" in typed
    elsewhere = {
        flag: kind
        for flag, kind in typed.items()
        if getattr(kind, "__module__", None) != argtypes.__name__
    }
    assert elsewhere == {}


@pytest.mark.parametrize("flag", ["--context", "--gpus", "--batch", "--output-tokens"])
def test_plan_refuses_zero_instead_of_planning_a_default(flag, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["plan", "--model", "llama-3.1-8b", "--gpu", "h100", flag, "0"])
    assert stopped.value.code == 2
    assert f"{flag}: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_a_trial_seed_is_typed_like_a_runs_seed(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["sweep", "chat", "--rates", "1", "--seed", "-1"])
    assert stopped.value.code == 2
    assert "--seed: expected an integer >= 0, got '-1'" in capsys.readouterr().err


def test_an_age_in_days_or_shorter_units() -> None:
    assert argtypes.age("30d").total_seconds() == 30 * 86_400
    assert argtypes.age("90m").total_seconds() == 5400
    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.age("soon")
