"""Reasoning apart from the answer: TTFA, reasoning time, the token split and the
answer's ITL/TPOT from recorded timestamps, and every streamed form of reasoning
(chat deltas, Responses events, Anthropic thinking, <think> tags) fed byte by
byte through the SSE parser and the interpreter."""

from __future__ import annotations

import pytest
from streams import interpret, sse

from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.analysis.measurement.request_metrics import answer_chunk_tokens, request_metrics
from slogate.client import messages_stream, responses_stream
from slogate.client.think_tags import ThinkTags

MS = 1_000_000


def record(chars: list[int], reasoning: list[int], at_ms: list[float], **fields) -> RequestRecord:
    return RequestRecord(
        scenario="r",
        start_ns=0,
        end_ns=int(at_ms[-1] * MS) + MS,
        chunk_ns=[int(t * MS) for t in at_ms],
        chunk_chars=chars,
        chunk_reasoning=reasoning,
        finish_reason="stop",
        **fields,
    )


def test_ttfa_reasoning_time_and_answer_latencies_from_timestamps() -> None:
    # 3 reasoning chunks (10, 20, 30 ms), then 3 answer chunks (100, 110, 130 ms)
    r = record([5, 5, 5, 5, 5, 5], [5, 5, 5, 0, 0, 0], [10, 20, 30, 100, 110, 130])
    r.output_tokens = 6
    m = request_metrics(r)
    a = m.answer
    assert m.ttft_ns == 10 * MS  # TTFT stays the first output of any kind
    assert a.ttfa_ns == 100 * MS
    assert a.reasoning_ns == 90 * MS  # first reasoning chunk -> first answer chunk
    assert (a.reasoning_tokens, a.answer_tokens) == (3, 3)
    assert a.itl_ns == [(10 * MS, 1), (20 * MS, 1)]  # answer chunks only
    assert a.tpot_ns == 15 * MS  # (130 - 100) / (3 - 1)
    assert m.tpot_ns == 24 * MS  # all output: (130 - 10) / 5


def test_server_reasoning_count_wins_over_the_character_split() -> None:
    r = record([10, 10, 10], [10, 4, 0], [10, 20, 30], output_tokens=12, reasoning_tokens=7)
    a = request_metrics(r).answer
    assert (a.reasoning_tokens, a.answer_tokens) == (7, 5)
    assert a.ttfa_ns == 20 * MS  # the mixed chunk carried the first answer text


def test_mixed_chunk_tokens_split_by_characters() -> None:
    assert answer_chunk_tokens([4, 4, 4], [8, 8, 8], [8, 2, 0]) == [0, 3, 4]
    assert answer_chunk_tokens([1], [8], [7]) == [1]  # answer text means one token at least


def test_no_reasoning_means_answer_metrics_equal_the_headline_ones() -> None:
    r = record([4, 4, 4], [], [10, 30, 50], output_tokens=3)
    m = request_metrics(r)
    assert m.answer.ttfa_ns == m.ttft_ns
    assert m.answer.itl_ns == m.itl_ns
    assert m.answer.tpot_ns == m.tpot_ns
    assert m.answer.reasoning_ns is None
    assert (m.answer.reasoning_tokens, m.answer.answer_tokens) == (0, 3)


def test_hidden_reasoning_counts_but_has_no_reasoning_time() -> None:
    # o-series style: usage reports reasoning tokens, the stream shows none
    r = record([4, 4, 4], [], [500, 510, 520], output_tokens=103, reasoning_tokens=100)
    a = request_metrics(r).answer
    assert (a.reasoning_tokens, a.answer_tokens) == (100, 3)
    assert a.ttfa_ns == 500 * MS
    assert a.reasoning_ns is None
    assert a.tpot_ns == 10 * MS


def test_reasoning_without_an_answer_has_no_ttfa() -> None:
    r = record([4, 4], [4, 4], [10, 20], output_tokens=2)
    a = request_metrics(r).answer
    assert a.ttfa_ns is None and a.reasoning_ns is None
    assert (a.reasoning_tokens, a.answer_tokens) == (2, 0)


def test_recorder_keeps_the_split_and_answer_histograms() -> None:
    recorder = Recorder()
    r = record([5, 5, 5, 5], [5, 5, 0, 0], [10, 20, 100, 120], output_tokens=4)
    recorder.record(r, wall_s=1.0)
    bucket = recorder.bucket("r", "all")
    c = bucket.counters
    assert (c.reasoning_requests, c.reasoning_tokens, c.answer_tokens) == (1, 2, 2)
    h = bucket.histograms
    assert h.histogram("ttfa").get_max_value() == pytest.approx(100_000, rel=1e-3)
    assert h.histogram("reasoning").get_max_value() == pytest.approx(90_000, rel=1e-3)
    assert h.histogram("answer_itl").get_total_count() == 1


# --- the streamed forms ---------------------------------------------------------------


def chat(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


USAGE = {
    "choices": [],
    "usage": {
        "prompt_tokens": 5,
        "completion_tokens": 4,
        "completion_tokens_details": {"reasoning_tokens": 2},
    },
}


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("piece", [1, 7, 10_000])
def test_chat_reasoning_deltas(key: str, piece: int) -> None:
    stream = sse(
        chat({"role": "assistant", "content": ""}),
        chat({key: "Let me"}),
        chat({key: " think"}),
        chat({"content": "Hi"}),
        chat({"content": " there"}, "stop"),
        USAGE,
        b"[DONE]",
    )
    rec, interp = interpret(stream, piece)
    assert rec.ok, rec.error_message
    assert rec.chunk_reasoning == [6, 6, 0, 0]
    assert rec.reasoning_tokens == 2
    assert interp.text == "Hi there"
    a = request_metrics(rec).answer
    assert a.ttfa_ns == rec.chunk_ns[2]
    assert request_metrics(rec).ttft_ns == rec.chunk_ns[0]


def test_think_tags_in_content_split_across_chunks() -> None:
    pieces = ["<th", "ink>Let", " me", " see</th", "ink>\n\nThe", " answer"]
    stream = sse(*(chat({"content": p}) for p in pieces), chat({}, "stop"), b"[DONE]")
    rec, interp = interpret(stream, 10_000, tags=ThinkTags())
    assert rec.ok
    assert rec.chunk_reasoning == [3, 7, 3, 8, 4, 0]
    assert interp.text == "\n\nThe answer"
    assert request_metrics(rec).answer.ttfa_ns == rec.chunk_ns[4]


def test_think_block_opened_by_the_template_streams_only_the_close() -> None:
    stream = sse(chat({"content": "hmm"}), chat({"content": "</think>ok"}, "stop"), b"[DONE]")
    rec, interp = interpret(stream, 10_000, tags=ThinkTags(starts_inside=True))
    assert rec.chunk_reasoning == [3, 8]
    assert interp.text == "ok"


def test_content_without_tags_pays_nothing_and_keeps_its_text() -> None:
    stream = sse(chat({"content": "<p>"}), chat({"content": "plain"}, "stop"), b"[DONE]")
    rec, interp = interpret(stream, 10_000, tags=ThinkTags())
    assert rec.chunk_reasoning == []
    assert interp.text == "<p>plain"


RESPONSES = [
    {"type": "response.created", "response": {"status": "in_progress"}},
    {"type": "response.output_item.added", "item": {"type": "reasoning"}},
    {"type": "response.reasoning_text.delta", "delta": "Think"},
    {"type": "response.reasoning_summary_text.delta", "delta": "ing"},
    {"type": "response.output_item.added", "item": {"type": "message"}},
    {"type": "response.output_text.delta", "delta": "Hel"},
    {"type": "response.output_text.delta", "delta": "lo"},
    {"type": "response.output_text.done", "text": "Hello"},
]
COMPLETED = {
    "type": "response.completed",
    "response": {
        "status": "completed",
        "usage": {
            "input_tokens": 9,
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
        },
    },
}


@pytest.mark.parametrize("piece", [1, 13, 10_000])
def test_responses_reasoning_and_text(piece: int) -> None:
    rec, interp = interpret(
        sse(*RESPONSES, COMPLETED, event=True), piece, responses_stream.parse_event
    )
    assert rec.ok, rec.error_message
    assert rec.chunk_reasoning == [5, 3, 0, 0]
    assert (rec.output_tokens, rec.input_tokens, rec.reasoning_tokens) == (5, 9, 2)
    assert rec.finish_reason == "stop"
    assert interp.text == "Hello"


def test_responses_incomplete_is_a_normal_end_at_the_limit() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {"incomplete_details": {"reason": "max_output_tokens"}, "usage": None},
    }
    rec, _ = interpret(sse(*RESPONSES, incomplete), 10_000, responses_stream.parse_event)
    assert rec.ok and rec.finish_reason == "length"


@pytest.mark.parametrize(
    ("ending", "kind", "message"),
    [
        (
            {"type": "error", "code": "server_error", "message": "boom"},
            ErrorKind.STREAM_ERROR,
            "boom",
        ),
        (
            {"type": "response.failed", "response": {"error": {"message": "died", "code": "x"}}},
            ErrorKind.STREAM_ERROR,
            "died",
        ),
        (None, ErrorKind.TRUNCATED, "closed"),
        (b"{not json", ErrorKind.PROTOCOL, "invalid JSON"),
    ],
    ids=["error-event", "response-failed", "truncated", "malformed"],
)
def test_responses_failures_mid_stream(ending, kind: ErrorKind, message: str) -> None:
    events = [*RESPONSES[:6]] + ([] if ending is None else [ending])
    rec, _ = interpret(sse(*events, event=True), 5, responses_stream.parse_event)
    assert rec.error is kind
    assert message in rec.error_message
    assert len(rec.chunk_ns) == 3  # what came before the failure is kept


MESSAGES = [
    {
        "type": "message_start",
        "message": {
            "usage": {"input_tokens": 11, "output_tokens": 1, "cache_read_input_tokens": 4}
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Hmm"},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "x"},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "ping"},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Yes"}},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "name": "get", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'},
    },
    {"type": "content_block_stop", "index": 2},
]
MESSAGE_END = [
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


@pytest.mark.parametrize("piece", [1, 17, 10_000])
def test_messages_thinking_text_and_tool_use(piece: int) -> None:
    rec, interp = interpret(
        sse(*MESSAGES, *MESSAGE_END, event=True), piece, messages_stream.parse_event
    )
    assert rec.ok, rec.error_message
    assert rec.chunk_chars == [3, 3, 3, 7]  # thinking, text, tool name, tool arguments
    assert rec.chunk_reasoning == [3, 0, 0, 0]
    assert (rec.output_tokens, rec.input_tokens) == (9, 15)
    assert rec.finish_reason == "tool_use"
    assert interp.text == "Yes"


@pytest.mark.parametrize(
    ("ending", "kind", "message"),
    [
        (
            [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}],
            ErrorKind.STREAM_ERROR,
            "Overloaded",
        ),
        ([], ErrorKind.TRUNCATED, "closed"),
    ],
    ids=["error-event", "truncated"],
)
def test_messages_failures_mid_stream(ending: list, kind: ErrorKind, message: str) -> None:
    rec, _ = interpret(sse(*MESSAGES[:8], *ending, event=True), 3, messages_stream.parse_event)
    assert rec.error is kind
    assert message in rec.error_message
    assert len(rec.chunk_ns) == 2


# --- scenario keys and SLOs -----------------------------------------------------------

SCENARIO = """
name: think
api: {api}
engine_profile: qwen3-8b@h100
workload:
  kind: chat
  input_tokens: 100
  output_tokens: 64
request:
  think_tags: {tags}
  think_starts_inside: true
slo:
  ttfa_ms: {{p99: 5000}}
  reasoning_ms: {{p50: 3000}}
  answer_itl_ms: {{p99: 50}}
  answer_tpot_ms: {{p99: 40}}
  reasoning_tokens: {{p99: 2000}}
  goodput: {{min: 0.9, ttfa_ms: 5000}}
"""


def load(tmp_path, api: str = "messages", tags: str = "['<t>', '</t>']"):
    from slogate import scenarios

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(api=api, tags=tags))
    return scenarios.load(path)


def test_scenario_keys_for_reasoning_models(tmp_path) -> None:
    [s] = load(tmp_path)
    assert s.api == "messages"
    assert s.engine_profile == "qwen3-8b@h100"
    assert s.request.think_tags == ("<t>", "</t>")
    assert s.request.think_starts_inside
    metrics = {(t.metric, t.stat) for t in s.slo.thresholds}
    assert ("ttfa_ms", "p99") in metrics and ("reasoning_tokens", "p99") in metrics
    assert s.slo.goodput.ttfa_ms == 5000
    [off] = load(tmp_path, tags="false")
    assert off.request.think_tags is None


@pytest.mark.parametrize(
    ("api", "tags", "key"),
    [("grpc", "false", "api"), ("chat", "['<t>']", "request.think_tags")],
)
def test_bad_reasoning_keys_are_named(tmp_path, api: str, tags: str, key: str) -> None:
    from slogate.scenarios import ScenarioError

    with pytest.raises(ScenarioError) as info:
        load(tmp_path, api, tags)
    assert key in {p.path for p in info.value.problems}


def test_slos_on_answer_latencies_and_token_counts() -> None:
    from slogate.analysis.verdict.slo import Verdict, evaluate
    from slogate.scenarios.model import Threshold

    recorder = Recorder()
    for i in range(200):
        r = record([5, 5, 5, 5], [5, 5, 0, 0], [10, 20, 100 + i, 110 + i], output_tokens=40)
        recorder.record(r, wall_s=1.0)
    bucket = recorder.bucket("r", "all")
    ttfa = evaluate("r", Threshold("ttfa_ms", "p50", 250), bucket, 10.0)
    assert ttfa.verdict is Verdict.PASS and ttfa.value == pytest.approx(200, rel=0.01)
    late = evaluate("r", Threshold("ttfa_ms", "max", 250), bucket, 10.0)
    assert late.verdict is Verdict.FAIL and late.value == pytest.approx(299, rel=0.01)
    tokens = evaluate("r", Threshold("answer_tokens", "p50", 30), bucket, 10.0)
    assert tokens.verdict is Verdict.PASS and tokens.value == 20  # 40 tokens, half by chars


def plain(ttft_ms: float) -> RequestRecord:
    return record([4, 4, 4], [], [ttft_ms, ttft_ms + 10, ttft_ms + 20], output_tokens=3)


def thinking(ttfa_ms: float) -> RequestRecord:
    return record([4, 4, 4], [4, 0, 0], [5, ttfa_ms, ttfa_ms + 10], output_tokens=3)


def test_answer_histograms_cover_requests_before_the_first_that_reasoned() -> None:
    recorder = Recorder()
    for ttft in (10, 20, 30):
        recorder.record(plain(ttft), wall_s=1.0)
    h = recorder.bucket("r", "all").histograms
    assert "ttfa" not in h and "answer_itl" not in h  # plain streams pay nothing
    recorder.record(thinking(400), wall_s=1.0)
    recorder.record(plain(40), wall_s=1.0)
    ttfa = h.histogram("ttfa")
    assert ttfa.get_total_count() == 5
    assert ttfa.get_min_value() == pytest.approx(10_000, rel=1e-3)  # the first plain TTFT
    assert ttfa.get_max_value() == pytest.approx(400_000, rel=1e-3)
    assert h.histogram("answer_itl").get_total_count() == 5 * 2 - 1  # the thinker's answer: 1
    assert h.histogram("answer_tokens").get_total_count() == 5


@pytest.mark.parametrize("thinker_first", [True, False])
def test_merging_a_plain_bucket_with_one_that_reasoned(thinker_first: bool) -> None:
    plain_side, thinking_side = Recorder(), Recorder()
    for ttft in (10, 20):
        plain_side.record(plain(ttft), wall_s=1.0)
    thinking_side.record(thinking(400), wall_s=1.0)
    sides = [thinking_side, plain_side] if thinker_first else [plain_side, thinking_side]
    merged = Recorder()
    for side in sides:
        merged.absorb(side.drain())
    bucket = merged.bucket("r", "all")
    ttfa = bucket.histograms.histogram("ttfa")
    assert ttfa.get_total_count() == 3
    assert ttfa.get_min_value() == pytest.approx(10_000, rel=1e-3)
    assert bucket.counters.reasoning_requests == 1


def test_an_answer_slo_on_a_model_that_never_reasoned_reads_the_headline() -> None:
    from slogate.analysis.verdict.slo import Verdict, evaluate
    from slogate.scenarios.model import Threshold

    recorder = Recorder()
    for ttft in range(10, 210):
        recorder.record(plain(ttft), wall_s=1.0)
    result = evaluate("r", Threshold("ttfa_ms", "p50", 150), recorder.bucket("r", "all"), 1.0)
    assert result.verdict is Verdict.PASS
    assert result.value == pytest.approx(110, rel=0.01)
    assert result.count == 200


AGENT = """
name: a
api: {api}
workload: {{kind: chat, input_tokens: 100, output_tokens: 20, turns: 1}}
load: {load}
request: {{tools: {tools}}}
agent: {{max_steps: 4, tool_latency_s: 0.5}}
"""


def test_agent_scenarios_plan_tool_latencies(tmp_path) -> None:
    from slogate import scenarios
    from slogate.scenarios.planner import Planner

    path = tmp_path / "a.yaml"
    path.write_text(AGENT.format(api="chat", load="{users: 2}", tools=3))
    [s] = scenarios.load(path)
    assert s.agent.max_steps == 4
    assert [t["name"] for t in s.request.tools] == ["weather_0", "stock_price_1", "search_docs_2"]
    (turn,) = Planner(s, seed=0).conversation().turns
    assert turn.tool_latencies_s == (0.5, 0.5, 0.5, 0.5)


@pytest.mark.parametrize(
    ("api", "load", "tools", "key"),
    [
        ("completions", "{users: 2}", 3, "agent"),
        ("chat", "{rate: 2}", 3, "agent"),
        ("chat", "{users: 2}", 0, "request.tools"),
    ],
    ids=["no-tool-calls", "open-loop", "no-tools"],
)
def test_bad_agent_scenarios_are_named(tmp_path, api: str, load: str, tools: int, key: str) -> None:
    from slogate import scenarios
    from slogate.scenarios import ScenarioError

    path = tmp_path / "a.yaml"
    path.write_text(AGENT.format(api=api, load=load, tools=tools))
    with pytest.raises(ScenarioError) as info:
        scenarios.load(path)
    assert key in {p.path for p in info.value.problems}
