"""Priority classes end to end, for the runs on the simulated engine and the
CPU vLLM: a mix of an interactive class (priority 0) and a batch class
(priority 10) contending for an engine that runs one sequence at a time,
started with and without its priority scheduling policy.

One interactive user and three batch users, closed loop, no think time. Under
FCFS the four take turns, so every request waits for the other three (TTFT
equal within the noise, both classes). Under the priority policy an
interactive request, once it arrives, is next: it waits only for the request
running then, while a batch request waits for its turn among the batch ones
and for every interactive one arriving meanwhile (vLLM preempts no running
request for a waiting one, so the interactive user is not alone)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import yaml

HIGH, LOW = "interactive", "batch"
# The policy's effect, and what "equal within the noise" allows: p95s of a
# few dozen requests each on a busy machine
FAVOURED = 0.5
EQUAL = (2 / 3, 3 / 2)


def class_mix(folder: Path, duration: str, output_tokens: int) -> Path:
    """The mix: one interactive user, three batch ones, short prompts, each
    class with its own SLO (its error rate: the latencies are what the test
    compares) and headers a gateway would read."""
    member = {
        "name": "short",
        "api": "chat",
        "workload": {
            "kind": "chat",
            "text": "prose",
            "input_tokens": 32,
            "output_tokens": output_tokens,
            "turns": 1,
            "think_time_s": 0,
        },
        "request": {"ignore_eos": True},
        "timeouts": {"first_token": "60s", "stall": "30s"},
    }
    (folder / "short.yaml").write_text(yaml.safe_dump(member))
    mix = {
        "name": "classes",
        "seed": 0,
        "load": {"users": 4, "spawn_rate": 4, "duration": duration, "warmup": "3s"},
        "scenarios": [
            {
                "file": "short.yaml",
                "name": HIGH,
                "weight": 1,
                "class": {
                    "priority": 0,
                    "objective": "chat-interactive",
                    "slo": {"error_rate": {"max": 0.01}},
                },
            },
            {
                "file": "short.yaml",
                "name": LOW,
                "weight": 3,
                "class": {
                    "priority": 10,
                    "fairness_id": "batch-jobs",
                    "slo": {"error_rate": {"max": 0.01}},
                },
            },
        ],
    }
    path = folder / "classes.yaml"
    path.write_text(yaml.safe_dump(mix))
    return path


def ttft_p95(out: Path) -> tuple[float, float]:
    """The two classes' TTFT p95 (ms), checked to be judged as classes: every
    output names them, each class's SLOs are its own JUnit suite."""
    summary = json.loads((out / "summary.json").read_text())
    blocks = summary["scenarios"]
    assert set(blocks) == {HIGH, LOW}
    for name in (HIGH, LOW):
        assert blocks[name]["requests"]["ok"] >= 5, (name, blocks[name]["requests"])
        assert blocks[name]["traffic_class"]["sheds"] == {"429": 0, "503": 0}
    assert blocks[HIGH]["traffic_class"]["priority"] == 0
    suites = {s.get("name") for s in ET.parse(out / "junit.xml").getroot().iter("testsuite")}
    assert suites == {f"slogate.class.{HIGH}", f"slogate.class.{LOW}"}
    assert 'id="classes"' in (out / "report.html").read_text()
    return blocks[HIGH]["metrics"]["ttft_ms"]["p95"], blocks[LOW]["metrics"]["ttft_ms"]["p95"]


def assert_policy_shows(run: Callable[[bool], tuple[float, float]]) -> None:
    high, low = run(True)
    assert high < FAVOURED * low, f"priority policy: {HIGH} {high:.0f} ms, {LOW} {low:.0f} ms"
    high, low = run(False)
    assert EQUAL[0] * low < high < EQUAL[1] * low, f"FCFS: {HIGH} {high:.0f}, {LOW} {low:.0f} ms"
