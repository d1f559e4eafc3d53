"""The request id and W3C trace context every request carries
(client/identity.py; docs/load.md, "Request identity"), and the checks of the
flags that shape them."""

from __future__ import annotations

import re

import pytest
from loadruns import cli

from slogate.client.identity import Identity, new_trace_id

HEX32, HEX16 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{16}")


def header_lines(lines: bytes) -> dict[str, str]:
    pairs = [line.split(": ", 1) for line in lines.decode("latin-1").split("\r\n") if line]
    return {name: value for name, value in pairs}


def test_each_request_gets_its_own_id_and_span_in_the_runs_trace() -> None:
    trace = new_trace_id()
    identity = Identity(trace, tracestate="congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    stamped = [identity.stamp() for _ in range(1000)]
    assert len({ids.request_id for ids, _ in stamped}) == 1000
    assert len({ids.span_id for ids, _ in stamped}) == 1000
    ids, lines = stamped[0]
    assert HEX32.fullmatch(ids.request_id) and HEX16.fullmatch(ids.span_id)
    assert header_lines(lines) == {
        "traceparent": f"00-{trace}-{ids.span_id}-01",
        "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",  # as given
        "X-Request-Id": ids.request_id,
    }
    own = new_trace_id()
    conversation, lines = identity.stamp(own)
    assert conversation.trace_id == own and header_lines(lines)["traceparent"].startswith(
        f"00-{own}-"
    )


def test_the_request_id_header_is_renamed_or_left_out_and_the_id_still_kept() -> None:
    ids, lines = Identity(new_trace_id(), header="X-Correlation-Id").stamp()
    assert header_lines(lines)["X-Correlation-Id"] == ids.request_id
    ids, lines = Identity(new_trace_id(), header=None).stamp()
    assert list(header_lines(lines)) == ["traceparent"] and HEX32.fullmatch(ids.request_id)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--tracestate", "Congo=x", "'Congo=x' is not a tracestate member"),
        ("--tracestate", "a=1,b", "'b' is not a tracestate member"),
        ("--tracestate", ",".join(f"k{i}=v" for i in range(33)), "33 members"),
        ("--request-id-header", "X Request", "'X Request' is not an HTTP header name"),
    ],
)
def test_a_bad_tracestate_or_header_name_stops_the_run_naming_the_flag(
    flag: str, value: str, message: str
) -> None:
    done = cli("run", "chat", "--host", "http://127.0.0.1:9", flag, value)
    assert done.returncode == 2
    assert flag in done.stderr and message in done.stderr
