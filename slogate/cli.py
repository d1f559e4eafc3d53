"""The `slogate` command: wires the rooms together, holds no logic of its own.

Exit codes (docs/design.md): 0 every SLO passed, 1 an SLO failed, 2 bad
configuration, 3 the run itself failed or is invalid, 4 inconclusive.
Subcommand modules are imported only when used, so `slogate --help` and
`slogate scenario check` stay fast and never import Locust.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
from slogate.locustfiles.argtypes import (
    duration,
    endpoint,
    non_negative_float,
    non_negative_int,
    positive_duration,
    positive_float,
    positive_int,
    repeat_count,
)
from slogate.locustfiles.options import add_cli_options


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a scenario's load and gate on its SLOs")
    p.add_argument("scenario", help="scenario or mix YAML file, or a built-in name (chat, rag...)")
    p.add_argument(
        "--host",
        action="append",
        type=endpoint,
        metavar="[NAME=]URL",
        help="engine base URL; without it the simulated engine is started. Repeat it for "
        "several endpoints of one deployment (every metric broken down by endpoint)",
    )
    p.add_argument("--profile", default=None, help="simulated engine profile (without --host)")
    p.add_argument(
        "--web-ui",
        action="store_true",
        help="run with Locust's web UI (on 127.0.0.1: see --web-host), not headless",
    )
    p.add_argument(
        "--repeat",
        type=repeat_count,
        default=1,
        metavar="N",
        help="run the same load N times, each with its own folder and report, and gate on "
        "the spread of each SLO statistic across them (docs/ci.md, Repeats)",
    )
    p.add_argument(
        "--cooldown",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="with --repeat: the wait between two runs (default 30s)",
    )
    add_cli_options(p)


def add_engine_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "engine",
        help="serve an engine: the simulated one, llama.cpp's llama-server with --llama-cpp, "
        "or vLLM's CPU build with --vllm",
        description="Options after the first are passed to the engine; see `slogate engine "
        "--help-engine`, `slogate engine --llama-cpp --help-engine` or "
        "`slogate engine --vllm --help-engine`.",
    )
    real = p.add_mutually_exclusive_group()
    real.add_argument("--llama-cpp", action="store_true", help="llama-server with SmolLM2-135M")
    real.add_argument(
        "--vllm", action="store_true", help="vLLM (CPU) with SmolLM2-135M's shape, dummy weights"
    )
    p.add_argument("--help-engine", action="store_true", help="the engine's own options")


def add_scenario_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenario", help="check or sample a scenario file")
    ssub = p.add_subparsers(dest="scenario_command", required=True)
    check = ssub.add_parser(
        "check",
        help="validate; for a trace replayed at its times, its burstiness and whether this "
        "machine can send it on time",
    )
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="one JSON object")
    check.add_argument(
        "--max-lag-ms",
        type=positive_float,
        default=None,
        help="the lag bound the replay must keep (default: the scenario's)",
    )
    check.add_argument(
        "--no-measure", action="store_true", help="burstiness only: no cost measured, no server"
    )
    sample = ssub.add_parser("sample", help="print the planned requests as JSON lines")
    sample.add_argument("file")
    sample.add_argument("-n", type=non_negative_int, default=20, help="number of requests")
    sample.add_argument(
        "--seed", type=non_negative_int, default=None, help="default: the scenario's own"
    )


def add_small_parsers(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="re-render a results folder from its saved data")
    report.add_argument("dir")
    compare = sub.add_parser("compare", help="regression verdict of NEW against BASE")
    compare.add_argument("base")
    compare.add_argument("new")
    compare.add_argument(
        "--tolerance", type=non_negative_float, default=0.10, help="relative, default 0.10"
    )
    compare.add_argument("--all", action="store_true", help="print every percentile, not the gated")
    compare.add_argument(
        "--allow-uncertain",
        action="store_true",
        help="exit 0, not 3, when a gated latency rose by no more than the generators' error",
    )
    schema = sub.add_parser("schema", help="print a document's JSON Schema")
    schema.add_argument(
        "name",
        help="scenario (scenario and mix files), tune-factors (slogate tune --factors files), "
        "summary, sweep, experiment, repeats, tune or run-data",
    )
    selftest = sub.add_parser("selftest", help="this machine's measurement error and capacity")
    selftest.add_argument("--streams", type=positive_int, default=64)
    selftest.add_argument("--duration", type=positive_duration, default=10.0)
    selftest.add_argument("--json", action="store_true", help="print the result as one JSON line")


# Subcommands declared by their own module, ``slogate.<name>_cmd``: its
# ``add_arguments(p)`` and ``<name>_command(args)``. Each module is imported
# only when its subcommand is the one given (they import the studies, the
# reports and the engines); their one-line help is here, for ``slogate --help``.
DEFERRED = {
    "experiment": "a controlled experiment: vary one factor, hold the rest, repeat",
    "sweep": "run a scenario at rising load; --find-max: the highest load under its SLOs",
    "plan": "KV-cache and memory plan of a model on a GPU (from the simulated profiles)",
    "prune": "remove old runs from a results root and rewrite its index",
    "worker": "generate load for a `slogate run --master` on another host",
    "capacity": "output events/s one load process holds here within 1 ms, and workers needed",
    "tune": "restart an engine per combination of settings; recommend the one holding most load",
    "export": "write a run's, sweep's or tune's results as llm-d Benchmark Reports or CSV",
}


def deferred_module(name: str) -> Any:
    return importlib.import_module(f"slogate.{name}_cmd")


class OneLineErrors(argparse.ArgumentParser):
    """Usage errors in one line with a pointer to ``--help``: argparse's own
    put the whole usage (20 lines for ``slogate run``) above the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(given: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``given`` (the first argument), only that
    deferred subcommand's module is imported, so ``slogate --help`` and
    ``slogate scenario check`` import none of them."""
    parser = OneLineErrors(
        prog="slogate", description="Load tests and SLO gates for LLM inference servers."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parser(sub)
    add_engine_parser(sub)
    add_scenario_parser(sub)
    add_small_parsers(sub)
    for name, summary in DEFERRED.items():
        p = sub.add_parser(name, help=summary)
        if given in (None, name):
            deferred_module(name).add_arguments(p)
    return parser


def run(args: argparse.Namespace) -> int:
    from slogate.run_cmd import run as run_load

    return run_load(args)


def engine(args: argparse.Namespace, rest: list[str]) -> int:
    if args.help_engine:
        rest = [*rest, "--help"]
    if args.llama_cpp:
        from slogate.engines.llamacpp import main as llama_main

        return llama_main(rest)
    if args.vllm:
        from slogate.engines.vllm import main as vllm_main

        return vllm_main(rest)
    from slogate.simengine.__main__ import main as sim_main

    return sim_main(rest)


def scenario(args: argparse.Namespace) -> int:
    from slogate.scenario_cmd import scenario_command

    return scenario_command(args)


def report(args: argparse.Namespace) -> int:
    from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
    from slogate.reports import NotResults, rerender
    from slogate.reports.terminal import verdict_table

    try:
        outcome = rerender(args.dir)
    except NotResults as error:
        print(f"slogate report: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as error:  # the data were read; an output could not be written
        return crashed(error, args, Path(args.dir))
    print(verdict_table(outcome.summary, outcome.files["report"]))
    return outcome.exit_code


def compare(args: argparse.Namespace) -> int:
    from slogate.compare_cmd import compare_command

    return compare_command(args)


def schema(args: argparse.Namespace) -> int:
    from slogate.analysis.documents.contracts import json_schema
    from slogate.analysis.verdict.exitcodes import EXIT_CONFIG

    if args.name == "scenario":
        from slogate.scenarios.json_schema import scenario_schema

        print(json.dumps(scenario_schema(), indent=1))
        return 0
    if args.name == "tune-factors":
        from slogate.studies.tune_factors import factors_schema

        print(json.dumps(factors_schema(), indent=1))
        return 0
    try:
        print(json.dumps(json_schema(args.name), indent=1))
    except ValueError as error:
        print(f"slogate schema: {error}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def selftest(args: argparse.Namespace) -> int:
    from slogate.locustfiles.selftest import run_selftest

    result = run_selftest(streams=args.streams, duration_s=args.duration)
    print(json.dumps(result.to_dict()) if args.json else "\n".join(result.lines()))
    return 0


def delegated(name: str) -> Callable[[argparse.Namespace], int]:
    """The ``<name>_command`` of :func:`deferred_module`, imported when called."""

    def call(args: argparse.Namespace) -> int:
        return getattr(deferred_module(name), f"{name}_command")(args)

    return call


COMMANDS = {
    "run": run,
    "scenario": scenario,
    "report": report,
    "compare": compare,
    "schema": schema,
    "selftest": selftest,
    **{name: delegated(name) for name in DEFERRED},
}


def patch_like_a_run(argv: Sequence[str]) -> None:
    """``slogate selftest`` measures the generator as a run has it: importing
    Locust monkey-patches the whole process. The patch must precede every import
    of ssl, and building the parser imports the engines (aiohttp, ssl): so it
    comes first, or gevent warns that ssl was imported before it."""
    if list(argv[:1]) in (["selftest"], ["capacity"]):
        from gevent import monkey

        monkey.patch_all()


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes are a contract: any exception a command did not turn into its
    own code ends it with 3 and one line; the traceback goes to a log file."""
    given = list(sys.argv[1:] if argv is None else argv)
    patch_like_a_run(given)
    parser = build_parser(given[0] if given else "")
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "engine":
            return engine(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return COMMANDS[args.command](args)
    except Exception as error:
        return crashed(error, args)


def crashed(error: BaseException, args: argparse.Namespace, folder: Path | None = None) -> int:
    """Exit 3 with one line; the traceback goes to a log in ``folder`` when it
    takes one (docs/reliability.md)."""
    from slogate.analysis.verdict.exitcodes import EXIT_INVALID
    from slogate.reports.crashlog import crash_line, write_crash_log

    command = f"slogate {args.command}"
    log = write_crash_log(error, command, folder)
    print(f"{command}: {crash_line(error, log)}", file=sys.stderr)
    return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
