"""Plain HTTP to a real engine (llama.cpp, vLLM), for the tests that check the
engine itself beside what slogate measures: no slogate client in between."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest


def require_engine(name: str, skip_env: str, locate: Callable[[], object]) -> None:
    """``skip_env=1`` skips the test; an engine ``locate`` does not find fails it
    with ``locate``'s message, which says how to install it."""
    if os.environ.get(skip_env) == "1":
        pytest.skip(f"{skip_env}=1: {name} end-to-end tests skipped")
    try:
        locate()
    except FileNotFoundError as exc:
        pytest.fail(f"{exc} (or set {skip_env}=1 to skip these tests)", pytrace=False)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def stream_chat(url: str, model: str, prompt: str, max_tokens: int, **fields: Any) -> list[Any]:
    """The decoded ``data:`` payloads of one streamed chat completion of exactly
    ``max_tokens`` tokens (``ignore_eos``), ``[DONE]`` included; ``fields`` are
    added to the body."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        **fields,
    }
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    events: list[Any] = []
    with urllib.request.urlopen(request, timeout=120) as response:
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data:"):
                data = line[len("data:") :].strip()
                events.append(data if data == "[DONE]" else json.loads(data))
    return events
