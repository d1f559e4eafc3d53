"""What engine is behind a URL: its models, and its tokenizer endpoint if it has one.

Asked once before any load is sent, with plain blocking HTTP (cooperative under
gevent when Locust has patched the process). ``GET /v1/models`` answers the
model name a scenario's ``model: auto`` stands for, and ``owned_by`` usually
names the engine (vllm, sglang, llamacpp, ...). ``/tokenize`` lets the load side
count tokens exactly with the engine's own tokenizer: vLLM takes ``{prompt}``
and answers ``{count}``, llama.cpp takes ``{content}`` and answers ``{tokens}``.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

from slogate.analysis.neutral import neutral_text

__all__ = [
    "EngineError",
    "EngineInfo",
    "EngineUnreachable",
    "discover",
    "parse_base_url",
    "remote_token_counter",
]

PROBE_TEXT = "hello world"


class EngineError(RuntimeError):
    """The engine answered, but not as an OpenAI-compatible server would."""


class EngineUnreachable(EngineError):
    """Nothing answered at the URL: refused, timed out, or the name did not resolve."""


@dataclass(frozen=True, slots=True)
class EngineInfo:
    model: str  # the first model id: what ``model: auto`` resolves to
    owned_by: str
    models: tuple[str, ...]
    context: int | None = None  # tokens, prompt and output together (vLLM's max_model_len)


def parse_base_url(base_url: str) -> SplitResult:
    """The parts of an engine's base URL; ValueError (a configuration error) when
    it is not http(s)://host[:port][/path]."""
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError as error:  # out of range, or not a number
        raise ValueError(f"host {base_url!r}: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ValueError(f"host {base_url!r}: expected http://host[:port] or https://...")
    return parts


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def _key(api_key_env: str | None) -> str:
    return os.environ.get(api_key_env, "") if api_key_env else ""


def _masked(text: str, key: str) -> str:
    """``text`` with the key masked; masked before it is cut, so no straddling
    prefix of the key survives the cut."""
    return text.replace(key, "***") if key else text


def _shown(payload: Any, api_key_env: str | None) -> str:
    """A server's answer as quoted in an error: key masked, then cut to 300
    chars, its control and bidi characters neutralised (it reaches a terminal)."""
    return neutral_text(_masked(str(payload), _key(api_key_env))[:300])


def _call(
    url: str, timeout: float, api_key_env: str | None, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """(status, parsed JSON or None) of a GET (``body`` None) or a JSON POST."""
    headers = {"Accept": "application/json"}
    key = _key(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        message = f"cannot reach {url}: {reason}"
        if isinstance(reason, ssl.SSLCertVerificationError):
            message += " (an engine behind a private CA: point SSL_CERT_FILE at its certificate)"
        raise EngineUnreachable(_masked(message, key)) from exc
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def discover(base_url: str, api_key_env: str | None, timeout: float = 10.0) -> EngineInfo:
    """The engine's models from ``GET /v1/models``, asked with the key in the
    scenario's ``api_key_env`` (None: no key), never another variable's: a key
    sent to the wrong service leaks it. Raises ValueError for a URL that names no
    HTTP server, EngineUnreachable when nothing answers, EngineError when the
    answer is not a model list (the key masked in its text)."""
    parse_base_url(base_url)
    url = _root(base_url) + "/v1/models"
    status, payload = _call(url, timeout, api_key_env)
    if status != 200:
        detail = "" if payload is None else f": {_shown(payload, api_key_env)}"
        raise EngineError(
            f"GET {url} answered HTTP {status}{detail} (not an OpenAI-compatible server?)"
        )
    data = payload.get("data") if isinstance(payload, dict) else None
    entries = (
        [m for m in data if isinstance(m, dict) and m.get("id")] if isinstance(data, list) else []
    )
    if not entries:
        raise EngineError(f"GET {url} listed no models: {_shown(payload, api_key_env)}")
    context = entries[0].get("max_model_len")
    return EngineInfo(
        model=str(entries[0]["id"]),
        owned_by=str(entries[0].get("owned_by", "")),
        models=tuple(str(m["id"]) for m in entries),
        context=context if isinstance(context, int) and context > 0 else None,
    )


def remote_token_counter(
    base_url: str,
    api_key_env: str | None,
    timeout: float = 10.0,
    model: str | None = None,
) -> Callable[[str], int] | None:
    """A function counting a text's tokens with the engine's ``/tokenize`` (vLLM or
    llama.cpp style, found by probing), or None when the engine has neither. The
    function raises EngineError when a later call fails."""
    url = _root(base_url) + "/tokenize"
    vllm_body: dict[str, Any] = {"prompt": PROBE_TEXT, "add_special_tokens": False}
    if model:
        vllm_body["model"] = model
    status, payload = _call(url, timeout, api_key_env, vllm_body)
    if status == 200 and isinstance(payload, dict) and isinstance(payload.get("count"), int):
        return _counter(url, timeout, api_key_env, vllm_body, "prompt", lambda p: p["count"])
    llama_body: dict[str, Any] = {"content": PROBE_TEXT}
    status, payload = _call(url, timeout, api_key_env, llama_body)
    if status == 200 and isinstance(payload, dict) and isinstance(payload.get("tokens"), list):
        return _counter(
            url, timeout, api_key_env, llama_body, "content", lambda p: len(p["tokens"])
        )
    return None


def _counter(
    url: str,
    timeout: float,
    api_key_env: str | None,
    template: dict[str, Any],
    field: str,
    count: Callable[[dict[str, Any]], int],
) -> Callable[[str], int]:
    def count_tokens(text: str) -> int:
        status, payload = _call(url, timeout, api_key_env, {**template, field: text})
        if status != 200 or not isinstance(payload, dict):
            raise EngineError(f"POST {url} answered HTTP {status}: {_shown(payload, api_key_env)}")
        return int(count(payload))

    return count_tokens
