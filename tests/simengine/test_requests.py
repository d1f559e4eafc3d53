"""The simulated engine's reply ids: named after the request's X-Request-Id
as vLLM 0.32 names them (simengine/requests.py)."""

from __future__ import annotations

import re

from slogate.simengine.requests import reply_id


def test_the_simulated_engine_names_its_reply_after_the_request_id_as_vllm_does() -> None:
    assert reply_id("chat", "abc") == "chatcmpl-abc"
    assert reply_id("completions", "abc") == "cmpl-abc"
    assert reply_id("responses", "abc") != "resp_abc"  # vLLM's Responses API ignores it
    assert re.fullmatch(r"[0-9a-f]{32}", reply_id("chat", None).removeprefix("chatcmpl-"))
