"""The options of ``slogate run`` that reach the Locust process: each is one entry
here, which adds it to the run parser and passes it on to Locust when given.

A new run option that Locust's slogate plugin takes is one more entry (and its
definition in the plugin's parser, which plain ``locust -f`` users see).
Options that only ``slogate run`` itself reads (the scenario, ``--host``,
``--profile``, ``--processes``, ``--out``, ``--web-ui``) stay in the parser.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slogate.args import duration, non_negative_int, positive_float, positive_int


@dataclass(frozen=True)
class RunOption:
    """``flags`` as ``slogate run`` takes them; ``locust`` is the flag Locust takes
    when it differs; ``switch`` for a flag without a value."""

    flags: tuple[str, ...]
    help: str
    type: Callable[[str], Any] | None = None
    locust: str | None = None
    metavar: str | None = None
    switch: bool = False

    @property
    def dest(self) -> str:
        return self.flags[0].removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.switch:
            parser.add_argument(*self.flags, action="store_true", help=self.help)
        else:
            parser.add_argument(*self.flags, type=self.type, metavar=self.metavar, help=self.help)

    def forward(self, args: argparse.Namespace) -> list[str]:
        """The Locust arguments for this option's value in ``args`` (none when not given)."""
        value = getattr(args, self.dest)
        flag = self.locust or self.flags[0]
        if self.switch:
            return [flag] if value else []
        return [] if value is None else [flag, str(value)]


# Also taken by the commands that price what they measure or plan (sweep, experiment, plan).
PRICE = RunOption(
    ("--gpu-price-per-hour",),
    "price of one GPU-hour: the cost per million tokens is reported",
    positive_float,
)

RUN_OPTIONS = (
    RunOption(("--users", "-u"), "closed loop: concurrent users", int, locust="-u"),
    RunOption(("--spawn-rate", "-r"), "users started per second", float, locust="-r"),
    RunOption(("--rate",), "open loop: requests per second", float),
    # seconds, fractions kept (Locust's -t takes whole ones)
    RunOption(("--duration", "-t"), "run time, e.g. 30s, 5m", duration, "--slogate-duration"),
    RunOption(("--warmup",), "warm-up left out of the measurement, e.g. 5s", duration),
    RunOption(
        ("--baseline",),
        "results folder of a run to compare with, or 'auto': the newest earlier run "
        "of the same scenario and target in the results root; a regression exits 1",
    ),
    RunOption(("--push-metrics",), "Prometheus Pushgateway to push to", metavar="URL"),
    RunOption(("--seed",), "workload seed", non_negative_int),
    RunOption(("--max-lag-ms",), "open loop: generator lag bound", positive_float),
    RunOption(("--metrics-url",), "engine Prometheus URL ('off' disables)"),
    RunOption(("--dcgm-url",), "NVIDIA DCGM exporter metrics URL"),
    PRICE,
    RunOption(("--gpus",), "GPUs the engine runs on (with the price)", positive_int),
    RunOption(
        ("--selftest",),
        "first measure the generator's error at STREAMS streams; recorded in the summary",
        non_negative_int,
        metavar="STREAMS",
    ),
    RunOption(
        ("--save-requests",),
        "write every request's record to requests.jsonl in the results folder",
        switch=True,
    ),
    RunOption(("--locust-stats",), "also print Locust's own statistics tables", switch=True),
)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    for option in RUN_OPTIONS:
        option.add_to(parser)


def forwarded(args: argparse.Namespace) -> list[str]:
    """Every run option the user gave, as Locust's arguments."""
    return [arg for option in RUN_OPTIONS for arg in option.forward(args)]
