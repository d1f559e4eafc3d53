"""Cancelled requests: the scenario key and its errors, the planner's seeded
choice, the client closing the connection after a delay or some tokens, the
counts (apart from errors, outside every latency), and the simulated engine
really stopping its generation when the client leaves; the check that a
server let go is decided from its running-requests gauge."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scenario_problems import problems as file_problems
from simprobe import engine_metrics

from slogate import scenarios
from slogate.analysis.diagnosis.release import release_outcome
from slogate.analysis.documents.summary import requests_block
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts
from slogate.scenarios.planner import Planner

MS = 1_000_000
SCENARIO = """
name: tabs
workload:
  kind: chat
  input_tokens: 64
  output_tokens: 32
  turns: 3
"""


def scenario_path(tmp_path: Path, cancel: str, api: str = "chat") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(SCENARIO) + f"api: {api}\n" + textwrap.dedent(cancel))
    return path


def load(tmp_path: Path, cancel: str) -> list:
    return scenarios.load(scenario_path(tmp_path, cancel))


def problems(tmp_path: Path, cancel: str) -> dict[str, str]:
    return file_problems(scenario_path(tmp_path, cancel))


def test_cancel_key_loads_a_delay_or_a_token_count(tmp_path: Path) -> None:
    [s] = load(tmp_path, "cancel: {share: 0.25, after_s: {dist: uniform, min: 0.5, max: 2}}")
    assert s.cancel.share == 0.25 and s.cancel.after_tokens is None
    [s] = load(tmp_path, "cancel: {share: 1, after_tokens: 20}")
    assert s.cancel.after_s is None and s.cancel.after_tokens is not None


@pytest.mark.parametrize(
    ("cancel", "where", "says"),
    [
        ("cancel: {share: 0.2}", "cancel", "exactly one of after_s, after_tokens; got neither"),
        (
            "cancel: {share: 0.2, after_s: 1, after_tokens: 5}",
            "cancel",
            "got after_s and after_tokens",
        ),
        ("cancel: {share: 0, after_s: 1}", "cancel.share", "> 0"),
        ("cancel: {share: 1.5, after_s: 1}", "cancel.share", "<= 1"),
        ("cancel: {after_s: 1}", "cancel.share", "missing"),
        ("cancel: {share: 0.2, after_s: -1}", "cancel.after_s", ""),
        ("cancel: {share: 0.2, after_tokens: 5, when: now}", "cancel.when", ""),
        ("cancel: yes", "cancel", "mapping"),
    ],
)
def test_bad_cancel_keys_are_named(tmp_path: Path, cancel: str, where: str, says: str) -> None:
    found = problems(tmp_path, cancel)
    assert any(path.startswith(where) for path in found), found
    assert says in " ".join(found.values()), found


def test_embeddings_cannot_cancel_after_tokens(tmp_path: Path) -> None:
    text = """
    name: emb
    api: embeddings
    workload: {kind: embed, input_tokens: 64}
    cancel: {share: 0.5, after_tokens: 3}
    """
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(text))
    assert set(file_problems(path)) == {"cancel.after_tokens"}


def conversations(planner: Planner, n: int = 200) -> list[PlannedTurn]:
    return [turn for _ in range(n) for turn in planner.conversation().turns]


def test_the_planner_cancels_its_share_and_leaves_the_requests_alone(tmp_path: Path) -> None:
    [plain] = load(tmp_path, "")
    [cancelling] = load(
        tmp_path, "cancel: {share: 0.3, after_tokens: {dist: uniform, min: 2, max: 9}}"
    )
    planned = conversations(Planner(cancelling, 0, 1))
    again = conversations(Planner(cancelling, 0, 1))
    base = conversations(Planner(plain, 0, 1))
    assert planned == again  # seeded
    cut = [t.cancel_after_tokens for t in planned if t.cancel_after_tokens is not None]
    assert 0.25 < len(cut) / len(planned) < 0.35
    assert all(2 <= n <= 9 for n in cut) and all(t.cancel_after_s is None for t in planned)
    assert [t.user_text for t in planned] == [t.user_text for t in base]


def record(ttft_ms: int, cancelled: bool = False) -> RequestRecord:
    r = RequestRecord("tabs", start_ns=0)
    r.chunk_ns = [ttft_ms * MS, (ttft_ms + 5) * MS]
    r.chunk_chars = [3, 3]
    r.output_tokens = 2
    r.end_ns = (ttft_ms + 5) * MS
    return r.cancel(r.end_ns) if cancelled else r


def test_cancelled_requests_are_counted_apart_and_never_timed() -> None:
    recorder = Recorder()
    recorder.record(record(100), wall_s=1.0)
    recorder.record(record(5, cancelled=True), wall_s=1.0)
    recorder.record(record(7, cancelled=True), wall_s=1.0)
    bucket = recorder.bucket("tabs", "all")
    block = requests_block(bucket.counters)
    assert (block["ok"], block["failed"], block["cancelled"], block["total"]) == (1, 0, 2, 1)
    assert block["error_rate"] == 0.0 and bucket.counters.good == 1
    ttft = bucket.histograms.histogram("ttft")
    assert ttft.get_total_count() == 1 and ttft.get_min_value() > 99_000
    master = Recorder()
    master.absorb(recorder.drain())
    assert master.bucket("tabs", "all").counters.cancelled == 2


def test_release_is_the_first_reading_back_at_the_level_before_the_run() -> None:
    outcome = release_outcome(1.0, [(0.0, 4.0), (0.25, 2.0), (0.5, 1.0)], 10.0, 3, 1)
    assert outcome["released"] is True
    assert (outcome["waited_s"], outcome["running_after"], outcome["peak_after"]) == (0.5, 1.0, 4.0)
    kept = release_outcome(0.0, [(0.0, 4.0), (9.9, 4.0)], 10.0, 4, 0)
    assert kept["released"] is False and kept["running_after"] == 4.0 and kept["waited_s"] == 9.9
    assert release_outcome(None, [], 10.0, 1, 0)["released"] is None
    assert release_outcome(0.0, [], 10.0, 1, 0)["released"] is None


# -- on the wire, against the simulated engine --------------------------------------------
@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine()  # real time: 2000 tokens take seconds
    try:
        yield running
    finally:
        running.stop()


ABORTED = "vllm:request_success_total{finished_reason=abort}"


def series(engine: EngineProcess) -> dict[str, float]:
    return engine_metrics(engine.url)


def client(engine: EngineProcess) -> StreamClient:
    return StreamClient(
        engine.url,
        "chat",
        "meta-llama/Llama-3.1-8B-Instruct",
        RequestOptions(ignore_eos=True),
        Timeouts(first_token_s=30, stall_s=30),
        4,
    )


def long_turn(**cancel: object) -> PlannedTurn:
    return PlannedTurn("tabs", 0, 0, "tell me everything", 2000, 8, 2000, **cancel)  # type: ignore[arg-type]  # each its field's type


def wait_idle(engine: EngineProcess, bound_s: float) -> dict[str, float]:
    deadline = time.monotonic() + bound_s
    while True:
        now = series(engine)
        if now["vllm:num_requests_running"] == 0 or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def test_after_tokens_closes_the_stream_and_the_engine_stops(engine: EngineProcess) -> None:
    before = series(engine)
    c = client(engine)
    try:
        results = [c.send(long_turn(cancel_after_tokens=5)) for _ in range(3)]
    finally:
        c.close()
    for result in results:
        r = result.record
        assert r.cancelled and r.error is None and not r.ok
        assert 5 <= len(r.chunk_ns) < 100 and r.output_tokens is None  # no usage: cut early
    after = wait_idle(engine, 2.0)
    assert after["vllm:num_requests_running"] == 0
    assert after[ABORTED] - before[ABORTED] == 3
    # it stopped generating: a few steps per request, not 2000 tokens each
    generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert generated < 3 * 100, generated


def test_after_s_closes_the_stream_at_its_instant(engine: EngineProcess) -> None:
    before = series(engine)
    c = client(engine)
    try:
        r = c.send(long_turn(cancel_after_s=0.3)).record
    finally:
        c.close()
    assert r.cancelled and r.error is None
    lasted_ms = (r.end_ns - r.start_ns) / MS
    assert lasted_ms >= 300, lasted_ms
    assert r.chunk_ns and r.chunk_ns[-1] <= r.end_ns
    after = wait_idle(engine, 2.0)
    assert after["vllm:num_requests_running"] == 0
    assert after[ABORTED] - before[ABORTED] == 1


def test_a_cancel_after_the_end_changes_nothing(engine: EngineProcess) -> None:
    c = client(engine)
    try:
        short = PlannedTurn("tabs", 0, 0, "hi", 8, 2, 8, cancel_after_tokens=50)
        r = c.send(short).record
    finally:
        c.close()
    assert r.ok and not r.cancelled and r.output_tokens == 8
