"""argparse types of every command line: a bad value stops the command at once,
with the flag's name and the value, before any engine is started or load sent.

They live in the load room because Locust's parser (plain ``locust -f``) uses
them too, through :mod:`slogate.locustfiles.options`; the CLI imports them from
here, so a flag gives the same error whichever command took it."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar
from urllib.parse import urlsplit

from slogate.analysis.engine_side.server_metrics import parse_target
from slogate.analysis.verdict.saturation import MODES as SATURATION_MODES
from slogate.client.endpoints import AFFINITIES, SPREADS, parse_endpoint
from slogate.client.identity import header_name
from slogate.client.identity import tracestate as parse_tracestate
from slogate.scenarios.limits import MAX_PROBE_RPS, MAX_PROCESSES, MAX_REPEATS
from slogate.scenarios.units import parse_duration

Num = TypeVar("Num", int, float)


def duration(text: str) -> float:
    """Seconds from ``30s``, ``5m``, ``1m30s`` or a bare number."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def whole_seconds(text: str) -> int:
    """A duration of whole seconds (``30s``, ``2m``): what Locust's timers take."""
    seconds = duration(text)
    if seconds < 0 or not float(seconds).is_integer():
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole seconds, e.g. 30s or 2m")
    return int(seconds)


def warmup(text: str) -> float | str:
    """``--warmup``: a duration, or ``auto`` (the cut found after the run by MSER)."""
    return text if text == "auto" else duration(text)


def age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``: how old a run may be."""
    if text.endswith("d"):
        return timedelta(days=duration(text[:-1]))
    return timedelta(seconds=duration(text))


def _checked(text: str, kind: Callable[[str], Num], ok: Callable[[Num], bool], what: str) -> Num:
    value: Num | None
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def integer(text: str) -> int:
    """Any integer: for a flag whose range the scenario checks, with its own limits."""
    return _checked(text, int, lambda v: True, "an integer")


def number(text: str) -> float:
    """Any finite number: for a flag whose range the scenario checks."""
    return _checked(text, float, lambda v: True, "a number")


def positive_int(text: str) -> int:
    return _checked(text, int, lambda v: v >= 1, "an integer >= 1")


def repeat_count(text: str) -> int:
    """``--repeat``: identical runs of one set."""
    return _checked(
        text, int, lambda v: 1 <= v <= MAX_REPEATS, f"an integer from 1 to {MAX_REPEATS}"
    )


def probe_rate(text: str) -> float:
    """``--probes``: probes per second, 0 for none."""
    return _checked(
        text, float, lambda v: 0 <= v <= MAX_PROBE_RPS, f"a rate from 0 to {MAX_PROBE_RPS:g}"
    )


def process_count(text: str) -> int:
    return _checked(
        text, int, lambda v: 1 <= v <= MAX_PROCESSES, f"an integer from 1 to {MAX_PROCESSES}"
    )


def non_negative_int(text: str) -> int:
    return _checked(text, int, lambda v: v >= 0, "an integer >= 0")


def positive_float(text: str) -> float:
    return _checked(text, float, lambda v: v > 0, "a number > 0")


def non_negative_float(text: str) -> float:
    return _checked(text, float, lambda v: v >= 0, "a number >= 0")


def positive_duration(text: str) -> float:
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration > 0, got {text!r}")
    return seconds


def port(text: str) -> int:
    return _checked(text, int, lambda v: 1 <= v <= 65535, "a port from 1 to 65535")


def processes(text: str) -> int | str:
    """``auto`` or a number of load processes."""
    return text if text == "auto" else process_count(text)


def fit_mode(text: str) -> str:
    """``clamp`` or ``drop`` (``slogate.scenarios.context_fit``)."""
    # imported here: context_fit imports numpy, which `slogate --help` must not
    from slogate.scenarios.context_fit import FIT_MODES

    if text not in FIT_MODES:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(FIT_MODES)}")
    return text


def _one_of(text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(choices)}")
    return text


def saturation_mode(text: str) -> str:
    """``off``, ``monitor`` or ``stop`` (``slogate.analysis.verdict.saturation``)."""
    return _one_of(text, SATURATION_MODES)


def spread(text: str) -> str:
    """How requests spread over several endpoints (``slogate.client.endpoints``)."""
    return _one_of(text, SPREADS)


def affinity(text: str) -> str:
    """``conversation`` (a conversation stays on its endpoint) or ``request``."""
    return _one_of(text, AFFINITIES)


def _parses(text: str, parse: Callable[[str], object]) -> str:
    """``text`` as given, once ``parse`` took it (kept as text: it is passed on)."""
    try:
        parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def metrics_target(text: str) -> str:
    """``off``, a URL, or ``[TIER:]NAME=URL``, ``router=URL`` a router's
    (``slogate.analysis.engine_side.server_metrics``)."""
    return _parses(text, parse_target)


def endpoint(text: str) -> str:
    """``[NAME=]URL``: one of several endpoints (``slogate.client.endpoints``)."""
    return _parses(text, parse_endpoint)


def http_url(text: str) -> str:
    """An ``http://`` or ``https://`` URL with a host: a collector's base URL
    (empty: none, the option's default)."""
    parts = urlsplit(text)
    if text and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise argparse.ArgumentTypeError(f"expected an http(s)://HOST[:PORT] URL, got {text!r}")
    return text


def request_id_header(text: str) -> str:
    """``--request-id-header``: the header each request's id goes out in, or ``off``."""
    return text if text == "off" else _parses(text, header_name)


def tracestate(text: str) -> str:
    """``--tracestate``: a W3C tracestate, passed through on every request."""
    return _parses(text, parse_tracestate)


def web_login(text: str) -> str:
    """``USER:PASSWORD`` for the web UI's login page (the password may hold colons)."""
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise argparse.ArgumentTypeError("expected USER:PASSWORD, both non-empty")
    return text
