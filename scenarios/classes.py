"""Traffic classes: a mix member's priority, headers and its own SLOs.

Interactive and batch traffic share engines, and what decides who waits is
sent with each request: vLLM's ``priority`` body field (lower first, under
``--scheduling-policy priority``), llm-d's objective and fairness headers, or
any header a gateway routes by. A mix entry's ``class:`` says what its
requests carry and what they are held to; the member's scenario is then
judged by the class's SLOs, which replace the ones its file declares (a batch
class is not held to the chat file's interactive TTFT).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from slogate.scenarios.errors import quoted
from slogate.scenarios.model import Scenario, TrafficClass
from slogate.scenarios.schema import (
    MAPPING,
    Check,
    Invalid,
    Reader,
    Shape,
    join,
    nested,
    optional,
    pattern,
    section_shape,
)
from slogate.scenarios.sections import BODY_KEYS_WE_SET, HEADER_NAME, SLO_FIELDS, read_slo

# llm-d's Endpoint Picker reads these (llm-d.ai, "EPP HTTP Headers Reference"):
# the InferenceObjective whose priority applies, and the flow that shares
# capacity fairly with the others
OBJECTIVE_HEADER = "x-gateway-inference-objective"
FAIRNESS_HEADER = "x-gateway-inference-fairness-id"
# what the client writes itself, or what would change how the request is framed
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "user-agent",
        "authorization",
        "cookie",
    }
)
INT64 = 2**63  # vLLM's bounds of ``priority``
_HEADER_VALUE = re.compile(r"[\x21-\x7e\x80-\xff]([\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?")


def _header_value(value: Any) -> str:
    """A header's value as RFC 9110 allows it on the wire: visible characters
    with inner spaces, no line break (which would start a header of its own)."""
    if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
        raise ValueError
    return value


HEADER_VALUE = Check(
    "a header value (visible characters, no line break)",
    _header_value,
    {"type": "string", "pattern": pattern(_HEADER_VALUE)},
)
HEADERS_SHAPE: Shape = {
    "type": "object",
    "propertyNames": {"pattern": HEADER_NAME.shape["pattern"]},
    "additionalProperties": HEADER_VALUE.shape,
}


def _headers(reader: Reader, value: Any, path: str) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, dict):
        reader.problem(path, "expected a mapping of header names to values")
        return None
    headers = []
    for name, text in value.items():
        where = join(path, str(name))
        try:
            name = HEADER_NAME(name)
        except Invalid as exc:
            reader.problem(where, str(exc))
            continue
        if name in RESERVED_HEADERS:
            reader.problem(where, "the client sets this header itself; choose another")
        elif not isinstance(text, str) or not _HEADER_VALUE.fullmatch(text):
            reader.problem(where, f"expected {HEADER_VALUE.expects}, got {quoted(text)}")
        else:
            headers.append((name, text))
    return tuple(headers) if len(headers) == len(value) else None


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -INT64 <= value < INT64:
        raise ValueError
    return value


PRIORITY = Check(
    "a 64-bit integer (vLLM's priority: lower is served first)",
    _priority,
    {"type": "integer", "minimum": -INT64, "maximum": INT64 - 1},
)
CLASS_FIELDS = {
    "priority": optional(PRIORITY),
    "objective": optional(HEADER_VALUE),
    "fairness_id": optional(HEADER_VALUE),
    "headers": nested(_headers, HEADERS_SHAPE, {}),
    "body": optional(MAPPING, {}),
    "slo": nested(read_slo, section_shape(SLO_FIELDS)),
}


def read_class(reader: Reader, value: Any, path: str) -> TrafficClass | None:
    """A mix entry's ``class:``, nameless: the member names it (:func:`with_class`)."""
    f = reader.section(value, path, CLASS_FIELDS)
    if f is None:
        return None
    clashes = sorted(set(f["body"]) & {*BODY_KEYS_WE_SET, "priority"})
    if clashes:
        reader.problem(
            join(path, "body"),
            f"expected fields the load side does not set itself; remove {', '.join(clashes)}"
            + (" (set class.priority instead)" if "priority" in clashes else ""),
        )
        return None
    headers = list(f["headers"])
    for key, name in (("objective", OBJECTIVE_HEADER), ("fairness_id", FAIRNESS_HEADER)):
        if f[key] is None:
            continue
        if any(header == name for header, _ in headers):
            reader.problem(join(path, "headers"), f"{name} is set by class.{key}: give it once")
            return None
        headers.append((name, f[key]))
    return TrafficClass("", f["priority"], f["body"], tuple(headers), f["slo"])


def with_class(scenario: Scenario, traffic_class: TrafficClass) -> Scenario:
    """``scenario`` sending its class's fields and headers with every request,
    judged by the class's SLOs where the class gives them; the class takes the
    scenario's (the mix member's) name."""
    request = scenario.request
    body = {**request.extra_body, **traffic_class.body}
    if traffic_class.priority is not None:
        body["priority"] = traffic_class.priority
    named = dict(request.headers)
    named.update(traffic_class.headers)
    return replace(
        scenario,
        request=replace(request, extra_body=body, headers=tuple(named.items())),
        slo=traffic_class.slo or scenario.slo,
        traffic_class=replace(traffic_class, name=scenario.name),
    )
