"""The run options are declared once (`slogate.locustfiles.options`): Locust's
parser and `slogate run`'s take every one, and the Locust command `slogate run`
builds gives Locust the value a plain Locust command would. Checked for every
option of the registry, with Locust's real parser in a process of its own
(importing Locust patches the process it is imported in)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slogate.cli import build_parser
from slogate.locustfiles.options import OPTIONS, Option, forwarded
from slogate.run_cmd import locust_command

# Parses each argv of argv[1] (JSON) with Locust's parser, slogate's options added.
LOCUST_PARSE = """
import json, sys
from locust.argument_parser import get_parser, ui_extra_args_dict
from slogate.locustfiles import plugin
parser = get_parser()
parsed = [vars(parser.parse_args(argv)) for argv in json.loads(sys.argv[1])]
web_ui = ui_extra_args_dict([])
print(json.dumps({
    "parsed": parsed,
    "web_ui": sorted(web_ui),
    "web_ui_help": {name: extra["help_text"] for name, extra in web_ui.items()},
    "help": parser.format_help(),
}, default=str))
"""


def given(option: Option, flag: str) -> list[str]:
    return [flag] if option.switch else [flag, option.example]


def run_command(option: Option) -> list[str]:
    """The Locust arguments of `slogate run chat` given this option."""
    args = build_parser().parse_args(["run", "chat", *given(option, option.cli[0])])
    return locust_command(args, Path("s.yaml"), "http://h", Path("out"), (1, "one"))[3:]


@pytest.fixture(scope="module")
def locust(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """For each option, Locust's values from a plain command and from `slogate
    run`'s (None without one); and the options of Locust's web UI."""
    argvs = []
    for option in OPTIONS:
        argvs.append(given(option, option.flag))
        argvs.append(run_command(option) if option.cli and option.forward else [])
    done = subprocess.run(
        [sys.executable, "-c", LOCUST_PARSE, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path_factory.mktemp("no-locust-conf"),
        check=True,
    )
    answer = json.loads(done.stdout)
    parsed = answer["parsed"]
    by_flag = {}
    for i, option in enumerate(OPTIONS):
        by_flag[option.flag] = (parsed[2 * i], parsed[2 * i + 1] if argvs[2 * i + 1] else None)
    return {
        "by_flag": by_flag,
        "web_ui": answer["web_ui"],
        "web_ui_help": answer["web_ui_help"],
        "help": answer["help"],
    }


@pytest.mark.parametrize("option", OPTIONS, ids=[o.flag for o in OPTIONS])
def test_every_option_reaches_locust_the_same_from_both_commands(locust, option: Option) -> None:
    plain, through_run = locust["by_flag"][option.flag]
    value = plain[option.locust_dest]
    assert value != option.default  # else the example proves nothing
    if option.cli:
        args = build_parser().parse_args(["run", "chat", *given(option, option.cli[0])])
        assert getattr(args, option.cli_dest) == value
    if through_run is not None:
        assert through_run[option.locust_dest] == value


def test_a_run_given_no_option_passes_none_on() -> None:
    assert forwarded(build_parser().parse_args(["run", "chat"])) == []


def test_the_web_ui_shows_slogates_options_but_the_internal_ones(locust) -> None:
    shown = {o.locust_dest for o in OPTIONS if not o.locust_own and o.web_ui}
    assert locust["web_ui"] == sorted(shown)
    assert "scenario" in shown and not any(name.startswith("slogate_") for name in shown)


def subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from subcommands(sub)


def test_every_commands_help_renders() -> None:
    """argparse %-formats each help text: a bare percent sign in one (\"99% confidence\")
    made `slogate run --help` raise instead of printing."""
    parsers = list(subcommands(build_parser()))
    assert len(parsers) > 10
    for parser in parsers:
        assert parser.format_help().startswith("usage: "), parser.prog


def test_locusts_help_and_web_ui_show_each_options_text_as_written(locust) -> None:
    """Locust's `--help` renders every option slogate adds, and its web UI
    shows each help text as declared (not escaped for argparse)."""
    for option in OPTIONS:
        if option.locust_own:
            continue
        assert option.flag in locust["help"]
        if option.web_ui:
            assert locust["web_ui_help"][option.locust_dest] == option.help


def test_the_load_docs_list_every_option_slogate_adds_to_locust() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "load.md").read_text()
    table = docs.split("## Options slogate adds to Locust")[1].split("\n## ")[0]
    listed = {o.flag for o in OPTIONS if f"`{o.flag}" in table or f" {o.flag} " in table}
    user_options = {o.flag for o in OPTIONS if not o.locust_own and o.web_ui}
    assert user_options - listed == set()
