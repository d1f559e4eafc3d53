"""A minimal timing client for the simulated engine's tests.

Not the load generator (that is ``locustfiles/``): it sends one request with
aiohttp, keeps every SSE event with its arrival time and derives the few
numbers the engine's tests assert on (TTFT, TPOT, usage, how the stream ended).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson


@dataclass
class Probe:
    """One request's outcome; times are seconds from when the request was sent."""

    status: int = 0
    headers_s: float = 0.0
    events: list[tuple[float, bytes]] = field(default_factory=list)  # raw ``data:`` payloads
    body: bytes = b""
    error: str | None = None  # client exception class name (e.g. ClientPayloadError)

    @property
    def done(self) -> bool:
        """Whether the stream ended with ``data: [DONE]``."""
        return bool(self.events) and self.events[-1][1] == b"[DONE]"

    @property
    def chunks(self) -> list[tuple[float, dict[str, Any]]]:
        """Events that parse as JSON objects (``[DONE]`` and broken ones left out)."""
        parsed = []
        for at, data in self.events:
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                parsed.append((at, obj))
        return parsed

    @property
    def malformed(self) -> int:
        return sum(1 for _, d in self.events if d != b"[DONE]") - len(self.chunks)

    @property
    def content_chunks(self) -> list[tuple[float, str]]:
        """(time, text) of chunks that carry generated text."""
        out = []
        for at, obj in self.chunks:
            for choice in obj.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                if piece:
                    out.append((at, piece))
        return out

    @property
    def usage(self) -> dict[str, int] | None:
        usage = None
        for _, obj in self.chunks:
            if obj.get("usage") and not obj.get("choices"):
                usage = obj["usage"]
        if usage is None and self.body:
            usage = orjson.loads(self.body).get("usage")
        return usage

    @property
    def finish_reason(self) -> str | None:
        for _, obj in self.chunks:
            for choice in obj.get("choices") or []:
                if choice.get("finish_reason"):
                    return choice["finish_reason"]
        return None

    @property
    def ttft_s(self) -> float:
        return self.content_chunks[0][0]

    @property
    def end_s(self) -> float:
        return self.events[-1][0] if self.events else self.headers_s

    @property
    def tpot_s(self) -> float:
        """(last token - first token) / (completion tokens - 1), from chunk times."""
        usage = self.usage
        if usage is None:
            raise ValueError("no usage in the response")
        last = max(t for t, obj in self.chunks if obj.get("choices"))
        return (last - self.ttft_s) / max(1, usage["completion_tokens"] - 1)

    @property
    def text(self) -> str:
        if self.body:
            choice = orjson.loads(self.body)["choices"][0]
            return choice.get("text") or choice["message"]["content"]
        return "".join(piece for _, piece in self.content_chunks)


async def probe(
    session: aiohttp.ClientSession, url: str, body: Mapping[str, Any], timeout: float = 60.0
) -> Probe:
    """POST ``body`` to ``url``; stream it if ``body["stream"]``. Never raises for
    HTTP or stream failures: they are recorded in the result."""
    result = Probe()
    start = time.perf_counter()
    try:
        async with session.post(
            url, data=orjson.dumps(dict(body)), timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            result.status = response.status
            result.headers_s = time.perf_counter() - start
            if not body.get("stream") or response.status != 200:
                result.body = await response.read()
                return result
            async for line in response.content:
                if line.startswith(b"data: "):
                    result.events.append((time.perf_counter() - start, line[6:].rstrip(b"\r\n")))
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        result.error = type(exc).__name__
    return result


def chat_body(prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    """A streaming chat request with usage, as the load side sends it."""
    return {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


_salts = itertools.count(1)


def completion_body(prompt_tokens: int, max_tokens: int, **extra: Any) -> dict[str, Any]:
    """A streaming completion with a prompt of exactly ``prompt_tokens`` token ids,
    unique per call (its first token differs) so prefix caching never hits."""
    salt = next(_salts)
    return {
        "prompt": [salt, *(1000 + i % 20000 for i in range(prompt_tokens - 1))],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


async def probe_many(url: str, bodies: list[Mapping[str, Any]]) -> list[Probe]:
    """Send all ``bodies`` at once (one connection each) and wait for all."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        return list(await asyncio.gather(*(probe(session, url, b) for b in bodies)))


def engine_metrics(url: str) -> dict[str, float]:
    """The simulated engine's ``/metrics`` now, each sample by its name, with the
    labels other than ``model_name`` and ``engine`` after it:
    ``vllm:request_success_total{finished_reason=abort}``."""
    from prometheus_client.parser import text_string_to_metric_families

    from slogate.locustfiles.scraper import fetch_text, metrics_url_for

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(fetch_text(metrics_url_for(url), 10.0)):
        for sample in family.samples:
            labels = sorted(
                f"{k}={v}" for k, v in sample.labels.items() if k not in ("model_name", "engine")
            )
            name = sample.name + (f"{{{','.join(labels)}}}" if labels else "")
            values[name] = sample.value
    return values
