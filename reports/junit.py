"""``junit.xml``: one test case per SLO per scenario, so CI shows each gate by name.

A traffic class's suite is ``slogate.class.NAME``: its SLOs are its own cases.

A failed SLO is a ``<failure>`` whose text gives value, threshold and margin.
An inconclusive one is an ``<error>`` (not ``<skipped>``, which CI servers show
green): the gate could not be decided; so is an invalid one (the load
generator's own error could have flipped it). Each suite also has a ``run valid``
case, an error when the run was invalid, so an invalid run never reads as
passed. Text from servers may hold characters XML 1.0 forbids; they are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slogate.analysis.documents.neutral import neutral_text

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import SloEntry, Summary

_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    return _XML_FORBIDDEN.sub("", neutral_text(str(value)))


def describe(slo: SloEntry) -> str:
    """One line a person reads in a CI log: value vs threshold, margin, interval, n."""
    unit = " ms" if slo.metric.endswith("_ms") else ""
    lower, upper = slo.ci
    parts = [
        f"{slo.metric} {slo.stat} = {fmt(slo.value)}{unit}",
        f"threshold {'<=' if slo.kind == 'max' else '>='} {fmt(slo.threshold)}{unit}",
    ]
    if slo.margin is not None:
        pct = "" if slo.margin_pct is None else f" ({slo.margin_pct:+.1f}%)"
        parts.append(f"margin {slo.margin:+.4g}{unit}{pct}")
    if lower is not None or upper is not None:
        parts.append(f"95% CI [{fmt(lower)}, {fmt(upper)}]")
    parts.append(f"n={slo.n}")
    if slo.generator_error_ms is not None:
        parts.append(f"generator error ±{fmt(slo.generator_error_ms)}{unit}")
    if slo.note:
        parts.append(slo.note)
    return "; ".join(parts)


def fmt(value: float | None) -> str:
    return "open" if value is None else f"{value:.6g}"


def testcase(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=xml_text(name), time="0")


def scenario_suite(
    root: ET.Element,
    name: str,
    requests: int,
    slos: Sequence[SloEntry],
    reasons: list[str],
    timestamp: str,
) -> None:
    classname = xml_text(f"slogate.{name}")
    suite = ET.SubElement(root, "testsuite", name=classname, timestamp=timestamp)
    validity = testcase(suite, classname, "run valid")
    if reasons:
        message = xml_text("; ".join(reasons))
        ET.SubElement(validity, "error", message=message, type="InvalidRun").text = message
    if not requests:
        case = testcase(suite, classname, "requests measured")
        ET.SubElement(case, "error", message="no measured requests", type="NoRequests")
    for slo in slos:
        case = testcase(suite, classname, slo.name)
        text = xml_text(describe(slo))
        if slo.verdict == "fail":
            ET.SubElement(case, "failure", message=text, type="SLOFailed").text = text
        elif slo.verdict == "inconclusive":
            ET.SubElement(case, "error", message=text, type="SLOInconclusive").text = text
        elif slo.verdict == "invalid":
            ET.SubElement(case, "error", message=text, type="SLOInvalid").text = text
        else:
            ET.SubElement(case, "system-out").text = text
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", "0")
    suite.set("time", "0")


def junit_xml(summary: Summary | Mapping[str, Any]) -> bytes:
    """The JUnit document of a summary, UTF-8 with its XML declaration; a run
    with no scenario still gets one suite, whose cases say why."""
    from slogate.analysis.documents.contracts import Summary, as_model

    summary = as_model(Summary, summary, "summary")
    run = summary.run
    root = ET.Element("testsuites", name=xml_text(f"slogate {run.run_id or ''}".strip()))
    timestamp = xml_text((run.started_at or "")[:19]) or "1970-01-01T00:00:00"
    reasons = summary.invalid_reasons
    for name, block in summary.scenarios.items():
        # a traffic class's SLOs are its own suite: CI lists them by class
        label = name if block.traffic_class is None else f"class.{name}"
        scenario_suite(root, label, block.requests.total, block.slo, reasons, timestamp)
    if not summary.scenarios:
        scenario_suite(root, "run", 0, [], reasons, timestamp)
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root.findall("testsuite"))))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
