"""Priority classes end to end: on the simulated engine, started with and
without its priority scheduling policy (tests/support/classruns.py says what
the mix does and what each policy should show); and behind a gateway that
reads the classes' headers and sheds the batch class."""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from classruns import HIGH, LOW, assert_policy_shows, class_mix, ttft_p95
from httpserving import serving
from loadruns import ModelsHandler, slogate

from slogate.scenarios.classes import FAIRNESS_HEADER, OBJECTIVE_HEADER


@pytest.mark.slow
def test_the_simulated_engine_serves_the_high_class_first_only_under_its_policy(
    tmp_path: Path,
) -> None:
    """48 output tokens: a request holds the engine about 0.4 s, so a TTFT of
    turns (about a second) stands well above the generator's own delays on a
    busy machine (tens of ms), which 16 tokens' 0.1 s did not."""

    def run(policy: bool) -> tuple[float, float]:
        profile = "llama-3.1-8b@h100:max_num_seqs=1" + (":scheduling_policy=priority" * policy)
        out = tmp_path / f"out-{policy}"
        mix = class_mix(tmp_path, "15s", 48)
        done = slogate("run", str(mix), "--profile", profile, "--out", str(out))
        assert done.returncode == 0, done.stderr[-3000:]
        return ttft_p95(out)

    assert_policy_shows(run)


class SheddingGateway(ModelsHandler):
    """Serves the requests of objective ``chat-interactive``; sheds those of the
    flow ``batch-jobs``, 429 and 503 in turn, as a flow-controlled gateway
    does under load. Each answer takes 20 ms, so the loop stays gentle."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[Counter[tuple[str | None, str | None, int | None]]] = Counter()
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.load_request()
        if body is None:
            return
        time.sleep(0.02)
        key = (self.headers.get(OBJECTIVE_HEADER), self.headers.get(FAIRNESS_HEADER))
        with self.lock:
            self.seen[(*key, body.get("priority"))] += 1
            turn = sum(self.seen.values())
        if key[1] == "batch-jobs":
            status = (429, 503)[turn % 2]
            self.answer(status, {"error": {"message": "flow control: shed"}})
        else:
            self.reply(("hi", " there"))


@pytest.mark.slow
def test_a_gateway_sheds_one_class_and_the_class_is_judged_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), SheddingGateway)) as port:
        mix = class_mix(tmp_path, "6s", 16)
        done = slogate("run", str(mix), "--host", f"http://127.0.0.1:{port}", "--out", str(out))
    assert done.returncode == 1, done.stderr[-3000:]
    # every request carried its class, and nothing else reached the gateway
    assert set(SheddingGateway.seen) == {
        ("chat-interactive", None, 0),
        (None, "batch-jobs", 10),
    }, SheddingGateway.seen
    blocks = json.loads((out / "summary.json").read_text())["scenarios"]
    high, low = blocks[HIGH], blocks[LOW]
    assert high["requests"]["failed"] == 0 and high["requests"]["ok"] > 0
    assert high["traffic_class"]["sheds"] == {"429": 0, "503": 0}
    sheds = low["traffic_class"]["sheds"]
    assert sheds["429"] > 0 and sheds["503"] > 0
    assert sheds["429"] + sheds["503"] == low["requests"]["failed"] == low["requests"]["total"]
    assert low["verdict"] == "fail" and high["verdict"] != "fail"
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot().iter("testsuite")}
    failed = [
        c.get("name") for c in suites[f"slogate.class.{LOW}"] if c.find("failure") is not None
    ]
    assert failed == ["error_rate rate <= 0.01"]
    assert suites[f"slogate.class.{HIGH}"].get("failures") == "0"
