"""Every option of a load run, declared once.

Three things are generated from :data:`OPTIONS`: the options slogate adds to
Locust's parser (what plain ``locust -f locustfiles/...`` takes and its web UI
shows), the options of ``slogate run``, and the Locust arguments ``slogate run``
passes on. So a flag has one name, one validation and one error message
whichever command took it. The load room owns them because it consumes them;
the CLI imports this module, which imports no Locust (``slogate --help`` stays
fast and unpatched).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slogate.client.identity import REQUEST_ID_HEADER
from slogate.locustfiles.argtypes import (
    affinity,
    duration,
    endpoint,
    fit_mode,
    http_url,
    integer,
    metrics_target,
    non_negative_int,
    number,
    port,
    positive_float,
    positive_int,
    probe_rate,
    processes,
    request_id_header,
    saturation_mode,
    spread,
    tracestate,
    warmup,
    web_login,
    whole_seconds,
)
from slogate.locustfiles.request_log import REQUESTS_FILE
from slogate.locustfiles.web_access import AUTH_ENV, LOOPBACK
from slogate.scenarios.context_fit import FRAMING_TOKENS
from slogate.scenarios.limits import MAX_PROCESSES

MASTER_PORT = 5557  # Locust's own default


@dataclass(frozen=True)
class Option:
    """One option of a run.

    ``flag`` is the flag Locust takes; ``cli`` the flags ``slogate run`` takes
    for it (none: ``slogate run`` does not offer it). ``forward``: ``slogate
    run`` passes the value on when it differs from ``default`` (``--out`` it
    resolves and passes itself). ``locust_own``: a flag of Locust's own parser,
    which slogate does not add; ``dest`` is Locust's name for its value.
    ``scenario_key`` is the scenario's load setting the value replaces.
    ``example`` is a valid value, which the tests give both parsers.
    ``repeat``: the flag may be given several times, its values a list."""

    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    example: str = ""
    switch: bool = False
    repeat: bool = False
    metavar: str | None = None
    env_var: str | None = None
    web_ui: bool = True
    cli: tuple[str, ...] = ()
    forward: bool = True
    locust_own: bool = False
    dest: str = ""
    scenario_key: str | None = None

    @property
    def locust_dest(self) -> str:
        return self.dest or _dest(self.flag)

    @property
    def cli_dest(self) -> str:
        return _dest(self.cli[0])

    def _kwargs(self) -> dict[str, Any]:
        if self.switch:
            return {"action": "store_true", "default": False, "help": self.help}
        if self.repeat:
            return {
                "action": "append",
                "type": self.type,
                "metavar": self.metavar,
                "help": self.help,
            }
        return {
            "type": self.type,
            "default": self.default,
            "metavar": self.metavar,
            "help": self.help,
        }

    def add_to_locust(self, parser: Any) -> None:
        """Add to Locust's own parser (configargparse), which alone takes
        ``env_var`` and ``include_in_web_ui``."""
        extra = {"env_var": self.env_var} if self.env_var else {}
        parser.add_argument(self.flag, **self._kwargs(), **extra, include_in_web_ui=self.web_ui)

    def add_to_cli(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.cli, **self._kwargs())

    def forward_from(self, args: argparse.Namespace) -> list[str]:
        """The Locust arguments for this option's value in ``args`` (none when
        it is the default, which Locust has too)."""
        value = getattr(args, self.cli_dest)
        if self.switch:
            return [self.flag] if value else []
        if self.repeat:
            return [arg for item in value or () for arg in (self.flag, str(item))]
        return [] if value == self.default else [self.flag, str(value)]


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


# Also taken by the commands that price what they measure or plan (sweep, experiment, plan).
PRICE = Option(
    "--gpu-price-per-hour",
    "price of one GPU-hour: the report gives the cost per million tokens",
    positive_float,
    example="2.5",
    cli=("--gpu-price-per-hour",),
)

OPTIONS = (
    # `slogate run` takes it as its first argument, and passes it on resolved.
    Option(
        "--scenario",
        "scenario or mix YAML file, or a built-in name (default: the locustfile's own)",
        default="",
        example="chat",
        env_var="SLOGATE_SCENARIO",
    ),
    Option(
        "--out",
        "results folder (default results/<time>-<scenario>)",
        default="",
        example="results/mine",
        env_var="SLOGATE_OUT",
        cli=("--out",),
        forward=False,
    ),
    Option(
        "--processes",
        f"load-generating worker processes (<= {MAX_PROCESSES}), or auto (default): "
        "enough that none needs more than half a core for the planned load",
        processes,
        default="auto",
        example="2",
        cli=("--processes",),
        forward=False,  # `slogate run` plans auto, and links the processes itself
        locust_own=True,
    ),
    Option(
        "-u",
        "closed loop: concurrent users",
        integer,
        example="4",
        cli=("--users", "-u"),
        locust_own=True,
        dest="num_users",
        scenario_key="users",
    ),
    Option(
        "-r",
        "users started per second",
        number,
        example="2",
        cli=("--spawn-rate", "-r"),
        locust_own=True,
        dest="spawn_rate",
        scenario_key="spawn_rate",
    ),
    Option(
        "--rate",
        "open loop: requests per second (replaces the scenario's load)",
        number,
        example="5",
        cli=("--rate",),
        scenario_key="rate",
    ),
    Option(
        "--slogate-duration",
        "run time, e.g. 30s, 5m",
        duration,
        example="1m30s",
        web_ui=False,
        cli=("--duration", "-t"),
        scenario_key="duration",
    ),
    Option(
        "--warmup",
        "warm-up left out of the measurement, e.g. 5s, or 'auto': cut where TTFT and ITL "
        "settle, found after the run by MSER (replaces the scenario's)",
        warmup,
        example="5s",
        cli=("--warmup",),
        scenario_key="warmup",
    ),
    Option(
        "--seed",
        "workload seed",
        non_negative_int,
        example="7",
        cli=("--seed",),
        scenario_key="seed",
    ),
    Option(
        "--baseline",
        "results folder of a run to compare with, or 'auto': the newest earlier run of "
        "the same scenarios and target in the results root; a regression exits 1",
        default="",
        example="auto",
        metavar="DIR",
        cli=("--baseline",),
    ),
    Option(
        "--slice",
        "percentiles and SLO verdicts per slice of this length (a multiple of --window), "
        "so a drift over the run shows; 0: none",
        duration,
        default=0.0,
        example="60s",
        metavar="DURATION",
        cli=("--slice",),
    ),
    Option(
        "--probes",
        "also send RATE one-token requests per second outside the load's concurrency "
        "limit, reported apart: what a new user waits under the load; 0: none",
        probe_rate,
        default=0.0,
        example="2",
        metavar="RATE",
        cli=("--probes",),
    ),
    Option(
        "--saturation",
        "past saturation (requests in flight and TTFT both rising, a trend test at 99 percent "
        "confidence): 'monitor' says so in the verdict, 'stop' ends the run, exit 3; 'off'",
        saturation_mode,
        default="monitor",
        example="stop",
        metavar="MODE",
        cli=("--saturation",),
    ),
    Option(
        "--fit-context",
        "planned requests longer than the engine's announced context (prompt + max "
        "output tokens) stop the run before any load (exit 2, with the counts); 'clamp' "
        "cuts their output to fit (dropping a prompt that alone fills the context), "
        "'drop' leaves them out; the report says how many",
        fit_mode,
        example="clamp",
        metavar="MODE",
        cli=("--fit-context",),
    ),
    Option(
        "--abort-on-fail",
        "stop the run, FAIL, as soon as an SLO has failed for good (its whole 95 percent "
        "interval beyond the limit); a passing run always runs to the end",
        switch=True,
        cli=("--abort-on-fail",),
    ),
    Option(
        "--abort-min-window",
        "with --abort-on-fail: measured time (after warm-up) before any stop",
        duration,
        default=10.0,
        example="30s",
        metavar="DURATION",
        cli=("--abort-min-window",),
    ),
    Option(
        "--stop-timeout",
        "at the end, let the requests in flight finish (waiting up to DURATION) "
        "instead of cutting them off; none starts after the end",
        whole_seconds,
        default=0,
        example="30s",
        metavar="DURATION",
        cli=("--drain",),
        locust_own=True,
        dest="stop_timeout",
    ),
    Option(
        "--allow-uncertain",
        "let a gated latency that rose by no more than the load generators' error "
        "pass the baseline gate (by default the gate cannot tell, and exits 3)",
        switch=True,
        cli=("--allow-uncertain",),
    ),
    Option(
        "--push-metrics",
        "Prometheus Pushgateway URL to push the run's metrics to",
        default="",
        example="http://127.0.0.1:9091",
        metavar="URL",
        cli=("--push-metrics",),
    ),
    Option(
        "--otlp-endpoint",
        "OpenTelemetry collector's OTLP/HTTP base URL: the run's latency histograms, counts, "
        "throughput and verdict pushed every 5 s and at the end",
        http_url,
        default="",
        example="http://127.0.0.1:4318",
        metavar="URL",
        cli=("--otlp-endpoint",),
    ),
    Option(
        "--otlp-traces",
        "with --otlp-endpoint: also one span per request, with the ids it sent the server",
        switch=True,
        cli=("--otlp-traces",),
    ),
    Option(
        "--request-id-header",
        f"the header each request's unique id goes out in (default {REQUEST_ID_HEADER}, "
        "which vLLM makes its reply's id), or 'off' for a server that refuses it (the id "
        "is still recorded); every request also carries a W3C traceparent",
        request_id_header,
        default=REQUEST_ID_HEADER,
        example="X-Correlation-Id",
        metavar="NAME",
        cli=("--request-id-header",),
    ),
    Option(
        "--tracestate",
        "a W3C tracestate (key=value,...) sent unchanged beside every request's traceparent",
        tracestate,
        example="congo=t61rcWkgMzE",
        metavar="LIST",
        cli=("--tracestate",),
    ),
    Option(
        "--window",
        "time-series window, seconds",
        positive_float,
        default=5.0,
        example="2.5",
        cli=("--window",),
    ),
    Option(
        "--max-lag-ms",
        "open loop: generator lag p99 above this makes the run invalid",
        positive_float,
        example="20",
        cli=("--max-lag-ms",),
    ),
    Option(
        "--endpoint",
        "one of several endpoints of the deployment, [NAME=]URL (repeat it; "
        "`slogate run` takes --host repeated): every metric is broken down by endpoint",
        endpoint,
        example="a=http://127.0.0.1:8000",
        metavar="[NAME=]URL",
        repeat=True,
        web_ui=False,
    ),
    Option(
        "--spread",
        "with several endpoints: round-robin (default), weighted or least-in-flight",
        spread,
        default="round-robin",
        example="least-in-flight",
        metavar="POLICY",
        cli=("--spread",),
    ),
    Option(
        "--affinity",
        "with several endpoints: 'conversation' (default) keeps a conversation's turns "
        "and an agent's steps on one endpoint, 'request' spreads every request",
        affinity,
        default="conversation",
        example="request",
        metavar="MODE",
        cli=("--affinity",),
    ),
    Option(
        "--metrics-url",
        "engine Prometheus URL (default HOST/metrics; 'off' disables); repeat it as "
        "[TIER:]NAME=URL for each replica (TIER: prefill or decode) beside the router's; "
        "router=URL reads a router's per-replica series",
        metrics_target,
        example="replica-0=http://127.0.0.1:9000/metrics",
        metavar="[[TIER:]NAME=]URL",
        repeat=True,
        cli=("--metrics-url",),
    ),
    Option(
        "--dcgm-url",
        "NVIDIA DCGM exporter metrics URL",
        default="",
        example="http://127.0.0.1:9400/metrics",
        metavar="URL",
        cli=("--dcgm-url",),
    ),
    PRICE,
    Option(
        "--gpus",
        "GPUs the engine runs on (with the price)",
        positive_int,
        example="2",
        cli=("--gpus",),
    ),
    Option(
        "--selftest",
        "before the run, measure the generator's own error at STREAMS streams "
        "and record it in the summary",
        non_negative_int,
        default=0,
        example="16",
        metavar="STREAMS",
        cli=("--selftest",),
    ),
    Option(
        "--status-interval",
        "headless: seconds between status lines",
        positive_float,
        default=10.0,
        example="1.5",
        cli=("--status-interval",),
    ),
    Option(
        "--locust-stats",
        "also print Locust's own statistics tables (its percentiles are rounded; "
        "the verdict uses slogate's)",
        switch=True,
        cli=("--locust-stats",),
    ),
    Option(
        "--save-requests",
        f"write every request's record to {REQUESTS_FILE} in the results folder",
        switch=True,
        cli=("--save-requests",),
    ),
    Option(
        "--master",
        "run as the master of workers started with `slogate worker` (any host)",
        switch=True,
        cli=("--master",),
        locust_own=True,
    ),
    Option(
        "--expect-workers",
        "with --master: workers to wait for",
        positive_int,
        default=1,
        example="3",
        cli=("--expect-workers",),
        locust_own=True,
    ),
    Option(
        "--master-bind-host",
        "with --master: interface to listen on (default all)",
        default="*",
        example="127.0.0.1",
        cli=("--master-bind-host",),
        locust_own=True,
    ),
    Option(
        "--master-bind-port",
        f"with --master: port (default {MASTER_PORT})",
        port,
        default=MASTER_PORT,
        example="5600",
        cli=("--master-bind-port",),
        locust_own=True,
    ),
    Option(
        "--web-host",
        f"with --web-ui: the address it listens on (default {LOOPBACK}: this machine only; "
        "another needs --web-auth or --web-insecure)",
        default=LOOPBACK,
        example="::1",
        cli=("--web-host",),
        forward=False,  # `slogate run` passes it with --web-ui: Locust's default is every address
        locust_own=True,
    ),
    Option(
        "--web-port",
        "with --web-ui: its port",
        port,
        default=8089,
        example="8090",
        cli=("--web-port",),
        locust_own=True,
    ),
    Option(
        "--slogate-web-auth",
        f"with --web-ui (and Locust's --web-login): a login page for USER:PASSWORD; "
        f"better given as {AUTH_ENV}, which no process list shows",
        web_login,
        example="me:secret",
        metavar="USER:PASSWORD",
        env_var=AUTH_ENV,
        web_ui=False,
        cli=("--web-auth",),
        forward=False,  # `slogate run` passes it in the environment, never on a command line
    ),
    Option(
        "--web-insecure",
        "let the web UI listen beyond this machine with no login (anyone who reaches it "
        "can start load with your API key)",
        switch=True,
        web_ui=False,
        cli=("--web-insecure",),
    ),
    # Set by `slogate run` or the master, never by hand.
    Option(
        "--slogate-origin",
        "internal: the run's origin, set by the master",
        float,
        default=0.0,
        example="12.5",
        web_ui=False,
    ),
    Option(
        "--slogate-model",
        "internal: the model the master resolved",
        default="",
        example="m",
        web_ui=False,
    ),
    Option(
        "--slogate-engine",
        "internal: the engine as it named itself to the master (/v1/models owned_by)",
        default="",
        example="vllm",
        web_ui=False,
    ),
    Option(
        "--slogate-context",
        "internal: the engine's context in tokens, as the master found it (0: none)",
        int,
        default=0,
        example="4096",
        web_ui=False,
    ),
    Option(
        "--slogate-count-with",
        "internal: how the master found prompts are counted against the context (engine|local)",
        default="local",
        example="engine",
        web_ui=False,
    ),
    Option(
        "--slogate-framing",
        "internal: tokens the engine's chat template adds per message, as the master found them",
        int,
        default=FRAMING_TOKENS,
        example="5",
        web_ui=False,
    ),
    Option(
        "--slogate-trace-id",
        "internal: the run's trace id (W3C trace context), chosen by the master",
        default="",
        example="4bf92f3577b34da6a3ce929d0e0e4736",
        web_ui=False,
    ),
    Option(
        "--slogate-processes-reason",
        "internal: why `slogate run` chose its number of processes",
        default="",
        example="--processes 2",
        web_ui=False,
    ),
    Option(
        "--slogate-shards",
        "internal: number of load-generating processes",
        int,
        default=1,
        example="2",
        web_ui=False,
    ),
)


def add_locust_options(parser: Any) -> None:
    """slogate's options on Locust's parser (the ``init_command_line_parser`` event)."""
    for option in OPTIONS:
        if not option.locust_own:
            option.add_to_locust(parser)


def cli_options() -> Iterator[Option]:
    return (option for option in OPTIONS if option.cli)


def add_cli_options(parser: argparse.ArgumentParser) -> None:
    for option in cli_options():
        option.add_to_cli(parser)


def forwarded(args: argparse.Namespace) -> list[str]:
    """Every option of ``slogate run`` the user set, as Locust's arguments."""
    return [arg for option in cli_options() if option.forward for arg in option.forward_from(args)]


def scenario_overrides(values: Any, *, cli: bool = False) -> dict[str, Any]:
    """The scenario's load settings the command line replaces, from Locust's
    parsed options (or ``slogate run``'s with ``cli``)."""
    given = {
        option.scenario_key: getattr(values, option.cli_dest if cli else option.locust_dest)
        for option in OPTIONS
        if option.scenario_key
    }
    return {key: value for key, value in given.items() if value is not None}
