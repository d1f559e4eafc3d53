"""Traffic classes: a mix entry's ``class:`` (priority, headers, its own SLOs)
is validated with the file and key named, and sent on the wire as written."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from httpserving import serving
from loadruns import ModelsHandler

from slogate.client.streaming import StreamClient
from slogate.scenarios import loader
from slogate.scenarios.classes import FAIRNESS_HEADER, OBJECTIVE_HEADER
from slogate.scenarios.errors import ScenarioError
from slogate.scenarios.json_schema import scenario_schema
from slogate.scenarios.model import PlannedTurn, Threshold, Timeouts

MEMBER = """\
name: short
workload: {kind: chat, input_tokens: 64, output_tokens: 8}
slo: {ttft_ms: {p95: 100}}
"""


def mix(tmp_path: Path, interactive: str, batch: str = "{priority: 10}") -> Path:
    (tmp_path / "member.yaml").write_text(MEMBER)
    path = tmp_path / "mix.yaml"
    path.write_text(
        "load: {users: 2, duration: 10s}\n"
        "scenarios:\n"
        f"  - {{file: member.yaml, name: interactive, class: {interactive}}}\n"
        f"  - {{file: member.yaml, name: batch, class: {batch}}}\n"
    )
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ScenarioError) as raised:
        loader.load(path)
    return [str(p) for p in raised.value.problems]


def test_a_class_sends_its_fields_and_headers_and_takes_its_own_slos(tmp_path: Path) -> None:
    path = mix(
        tmp_path,
        "{priority: -1, objective: chat-premium, fairness_id: tenant-a, "
        "headers: {X-Team: search}, body: {top_k: 5}, slo: {ttft_ms: {p99: 250}}}",
    )
    interactive, batch = loader.load(path)
    assert interactive.request.extra_body == {"top_k": 5, "priority": -1}
    assert dict(interactive.request.headers) == {
        "x-team": "search",
        OBJECTIVE_HEADER: "chat-premium",
        FAIRNESS_HEADER: "tenant-a",
    }
    assert interactive.slo.thresholds == (Threshold("ttft_ms", "p99", 250.0),)
    assert interactive.traffic_class is not None
    assert interactive.traffic_class.name == "interactive"
    # no SLOs of its own: the class is held to its member file's
    assert batch.slo.thresholds == (Threshold("ttft_ms", "p95", 100.0),)
    assert batch.request.extra_body == {"priority": 10} and batch.request.headers == ()


@pytest.mark.parametrize(
    ("interactive", "where", "says"),
    [
        ("{priority: high}", "class.priority", "expected a 64-bit integer"),
        ("{priority: 9223372036854775808}", "class.priority", "got 9223372036854775808"),
        ("{body: {priority: 1}}", "class.body", "set class.priority instead"),
        ("{body: {stream: false}}", "class.body", "remove stream"),
        ("{headers: {Host: evil}}", "class.headers.Host", "the client sets this header"),
        ('{headers: {x-a: "one\\ntwo"}}', "class.headers.x-a", "no line break"),
        ("{headers: {'bad name': x}}", "class.headers.bad name", "an HTTP header name"),
        (
            f"{{objective: a, headers: {{{OBJECTIVE_HEADER}: b}}}}",
            "class.headers",
            "give it once",
        ),
        ("{slo: {ttft_ms: {p95: -1}}}", "class.slo.ttft_ms.p95", "expected a number"),
        ("{priorty: 1}", "class.priorty", "did you mean 'priority'"),
    ],
)
def test_a_bad_class_names_the_file_and_the_key(
    tmp_path: Path, interactive: str, where: str, says: str
) -> None:
    found = problems(mix(tmp_path, interactive))
    assert len(found) == 1, found
    assert found[0].startswith(f"{tmp_path / 'mix.yaml'}: scenarios[0].{where}: "), found
    assert says in found[0], found


def test_the_json_schema_knows_the_class_keys() -> None:
    member = scenario_schema()["then"]["properties"]["scenarios"]["items"]
    keys = set(member["properties"]["class"]["anyOf"][0]["properties"])
    assert keys == {"priority", "objective", "fairness_id", "headers", "body", "slo"}


class Capture(ModelsHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[dict, dict]]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.load_request()
        if body is None:
            return
        with self.lock:
            self.seen.append((dict(self.headers), body))
        self.reply(("hi", " there"))


def test_the_client_sends_the_class_on_the_wire(tmp_path: Path) -> None:
    interactive, _ = loader.load(
        mix(tmp_path, "{priority: 3, objective: premium, headers: {X-Team: search}}")
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    with serving(server) as port:
        client = StreamClient(
            f"http://127.0.0.1:{port}", "chat", "m", interactive.request, Timeouts(), 1
        )
        try:
            record = client.send(PlannedTurn("interactive", 0, 0, "hello", 8, 1, 8)).record
        finally:
            client.close()
    assert record.ok, record.error_message
    headers, body = Capture.seen[-1]
    assert body["priority"] == 3
    lowered = {k.lower(): v for k, v in headers.items()}
    assert lowered[OBJECTIVE_HEADER] == "premium" and lowered["x-team"] == "search"
