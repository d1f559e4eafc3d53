"""What engine is behind a URL: its models, its context, the routes it serves,
and its tokenizer endpoint if it has one.

Asked once before any load is sent, with plain blocking HTTP (cooperative under
gevent when Locust has patched the process). ``GET /v1/models`` answers the
model name a scenario's ``model: auto`` stands for, and ``owned_by`` usually
names the engine (vllm, sglang, llamacpp, ...). The context length is where
each engine announces it: ``max_model_len`` in the model list (vLLM, SGLang),
``n_ctx`` of llama.cpp's ``/props`` (one slot's share: a request longer than
its slot is refused), ``max_total_tokens`` of TGI's ``/info``. ``/tokenize``
lets the load side count tokens exactly with the engine's own tokenizer: vLLM
takes ``{prompt}`` and answers ``{count}``, llama.cpp takes ``{content}`` and
answers ``{tokens}``.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from slogate.analysis.documents.neutral import neutral_text
from slogate.client.deadline import within
from slogate.scenarios.limits import MAX_TOKENS

__all__ = [
    "EngineError",
    "EngineInfo",
    "EngineUnreachable",
    "RouteNotServed",
    "TokenizeError",
    "chat_framing",
    "discover",
    "parse_base_url",
    "probe_route",
    "remote_token_counter",
]

PROBE_TEXT = "hello world"
# pre-flight asks of an engine: an answer longer, or a side question slower, is none
BODY_LIMIT = 4 * 1024 * 1024
READ_CHUNK = 64 * 1024
SIDE_TIMEOUT_S = 2.0
# where an engine that leaves it out of its model list announces its context
SIDE_CONTEXTS = (
    ("/props", ("default_generation_settings", "n_ctx")),  # llama.cpp: one slot's
    ("/info", ("max_total_tokens",)),  # TGI
)


class EngineError(RuntimeError):
    """The engine answered, but not as an OpenAI-compatible server would."""


class EngineUnreachable(EngineError):
    """Nothing answered at the URL: refused, timed out, or the name did not resolve."""


class TokenizeError(EngineError):
    """The engine's ``/tokenize`` gave no answer, or one that is not a token
    count: the prompts it measures cannot be trusted, so the run stops (exit 3)."""


class RouteNotServed(EngineError):
    """The engine answers, but not on the scenario's API route: a configuration
    error (the wrong ``api:`` for this engine, or a base URL with a wrong path)."""


@dataclass(frozen=True, slots=True)
class EngineInfo:
    model: str  # the first model id: what ``model: auto`` resolves to
    owned_by: str
    models: tuple[str, ...]
    context: int | None = None  # tokens, prompt and output together (vLLM's max_model_len)


class BaseUrl(NamedTuple):
    """An engine's base URL, checked: unlike a SplitResult's, its host is there."""

    scheme: str
    hostname: str
    port: int | None
    path: str


def parse_base_url(base_url: str) -> BaseUrl:
    """The parts of an engine's base URL; ValueError (a configuration error) when
    it is not http(s)://host[:port][/path]."""
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError as error:  # out of range, or not a number
        raise ValueError(f"host {base_url!r}: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ValueError(f"host {base_url!r}: expected http://host[:port] or https://...")
    return BaseUrl(parts.scheme, parts.hostname, port, parts.path)


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


def _request(
    url: str, api_key_env: str | None, body: dict[str, Any] | None
) -> urllib.request.Request:
    """A GET (``body`` None) or a JSON POST, with the scenario's key if any."""
    headers = {"Accept": "application/json"}
    key = _key(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return urllib.request.Request(url, data=data, headers=headers)


def _open(request: urllib.request.Request, timeout: float, api_key_env: str | None) -> Any:
    """The answer's status and headers, whatever its status, within ``timeout``
    as a whole (:func:`slogate.client.deadline.within`); EngineUnreachable when
    none came by then."""
    try:
        return within(lambda: _opened(request, timeout, api_key_env), timeout, _close)
    except TimeoutError as exc:
        message = f"cannot reach {request.full_url}: {exc}"
        raise EngineUnreachable(_masked(message, _key(api_key_env))) from exc


def _close(answer: Any) -> None:
    answer.close()


def _opened(request: urllib.request.Request, timeout: float, api_key_env: str | None) -> Any:
    """The answer, whatever its status (an HTTPError is one too); EngineUnreachable
    when none came."""
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        return exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        message = f"cannot reach {request.full_url}: {reason}"
        if isinstance(reason, ssl.SSLCertVerificationError):
            message += " (an engine behind a private CA: point SSL_CERT_FILE at its certificate)"
        raise EngineUnreachable(_masked(message, _key(api_key_env))) from exc


def _read(answer: Any, deadline: float) -> bytes | None:
    """The answer's body, or None when it is longer than BODY_LIMIT or still
    coming at ``deadline``: a server that streams forever stalls no pre-flight."""
    parts: list[bytes] = []
    size = 0
    try:
        while chunk := answer.read1(READ_CHUNK):  # what has come, not a whole chunk
            parts.append(chunk)
            size += len(chunk)
            if size > BODY_LIMIT or time.monotonic() > deadline:
                return None
    except OSError:
        return None
    return b"".join(parts)


def _call(
    url: str, timeout: float, api_key_env: str | None, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """(status, parsed JSON or None) of a GET (``body`` None) or a JSON POST,
    all of it within ``timeout``."""
    deadline = time.monotonic() + timeout
    with _open(_request(url, api_key_env, body), timeout, api_key_env) as answer:
        status, raw = answer.status, _read(answer, deadline)
    try:
        return status, None if raw is None else json.loads(raw)
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
    context = _positive(entries[0].get("max_model_len"))
    return EngineInfo(
        model=str(entries[0]["id"]),
        owned_by=str(entries[0].get("owned_by", "")),
        models=tuple(str(m["id"]) for m in entries),
        context=context or _side_context(_root(base_url), api_key_env),
    )


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _side_context(root: str, api_key_env: str | None) -> int | None:
    """The context an engine that leaves it out of its model list announces
    elsewhere: llama.cpp's ``/props`` (``default_generation_settings.n_ctx``,
    one slot's), TGI's ``/info`` (``max_total_tokens``); None when neither says
    so within SIDE_TIMEOUT_S (an engine without them answers 404 at once)."""
    for path, keys in SIDE_CONTEXTS:
        try:
            status, payload = _call(root + path, SIDE_TIMEOUT_S, api_key_env)
        except EngineUnreachable:
            return None
        for key in keys:
            payload = payload.get(key) if isinstance(payload, dict) else None
        if status == 200 and (context := _positive(payload)):
            return context
    return None


def probe_route(base_url: str, path: str, model: str, api_key_env: str | None) -> None:
    """Raise RouteNotServed when ``POST path`` answers 404 or 405. The probe
    names the engine's own model and nothing else, so a server that serves the
    route refuses it as incomplete (400 or 422) without generating, and a 404
    cannot be a model the engine does not know. Any other answer, or none
    within SIDE_TIMEOUT_S, is the load's to measure: the body is not read."""
    url = _root(base_url) + path
    deadline = time.monotonic() + SIDE_TIMEOUT_S
    try:
        answer = _open(_request(url, api_key_env, {"model": model}), SIDE_TIMEOUT_S, api_key_env)
    except EngineUnreachable:
        return
    with answer:
        if answer.status not in (404, 405):
            return
        raw = _read(answer, deadline)
    payload = None
    if raw is not None:
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode(errors="replace")
    detail = "" if payload is None else f": {_shown(payload, api_key_env)}"
    raise RouteNotServed(
        f"POST {url} answered HTTP {answer.status}{detail}: this engine does not serve "
        "the scenario's api there (check the scenario's api: and the host's path)"
    )


def remote_token_counter(
    base_url: str,
    api_key_env: str | None,
    timeout: float = 10.0,
    model: str | None = None,
) -> Callable[[str], int] | None:
    """A function counting a text's tokens with the engine's ``/tokenize`` (vLLM or
    llama.cpp style, found by probing), or None when the engine has neither
    (it answers, but not with a count). Raises TokenizeError when the probe
    gets no answer within ``timeout``; the function raises it when a later
    call gets none, or an answer that is not a count (docs/reliability.md)."""
    url = _root(base_url) + "/tokenize"
    vllm_body: dict[str, Any] = {"prompt": PROBE_TEXT, "add_special_tokens": False}
    if model:
        vllm_body["model"] = model
    llama_body: dict[str, Any] = {"content": PROBE_TEXT}
    for template, field, count, key in (
        (vllm_body, "prompt", _vllm_count, "count"),
        (llama_body, "content", _llama_count, "tokens"),
    ):
        status, payload = _tokenize_call(url, timeout, api_key_env, template)
        if status != 200 or not isinstance(payload, dict) or key not in payload:
            continue
        if count(payload) is None:  # the field is there, but holds no count
            raise TokenizeError(_not_a_count(url, status, payload, api_key_env))
        return _counter(url, timeout, api_key_env, template, field, count)
    return None


def chat_framing(
    base_url: str, api_key_env: str | None, timeout: float = 10.0, model: str | None = None
) -> int | None:
    """The tokens the engine's chat template adds around one user message (its
    default system prompt and the generation prompt included): vLLM's
    ``/tokenize`` counts ``messages`` as a chat request; None where it cannot."""
    url = _root(base_url) + "/tokenize"
    body: dict[str, Any] = {"prompt": PROBE_TEXT, "add_special_tokens": False}
    chat: dict[str, Any] = {
        "messages": [{"role": "user", "content": PROBE_TEXT}],
        "add_generation_prompt": True,
    }
    if model:
        body["model"] = chat["model"] = model
    plain = _vllm_count(_tokenize_call(url, timeout, api_key_env, body)[1])
    framed = _vllm_count(_tokenize_call(url, timeout, api_key_env, chat)[1])
    if plain is None or framed is None or framed < plain:
        return None
    return framed - plain


def _plausible(value: Any) -> int | None:
    """A token count, or None: a count is an integer from 0 to MAX_TOKENS (a
    count past it would make the prompt writer build text of that size)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


def _vllm_count(payload: Any) -> int | None:
    return _plausible(payload.get("count")) if isinstance(payload, dict) else None


def _llama_count(payload: Any) -> int | None:
    tokens = payload.get("tokens") if isinstance(payload, dict) else None
    return _plausible(len(tokens)) if isinstance(tokens, list) else None


def _not_a_count(url: str, status: int, payload: Any, api_key_env: str | None) -> str:
    return (
        f"the engine's /tokenize (POST {url}) answered HTTP {status}: "
        f"{_shown(payload, api_key_env)}, not a token count from 0 to {MAX_TOKENS}"
    )


def _tokenize_call(
    url: str, timeout: float, api_key_env: str | None, body: dict[str, Any]
) -> tuple[int, Any]:
    """``_call`` of ``/tokenize``, whose lack of an answer is a TokenizeError."""
    try:
        return _call(url, timeout, api_key_env, body)
    except EngineUnreachable as error:
        raise TokenizeError(f"the engine's /tokenize did not answer: {error}") from None


def _counter(
    url: str,
    timeout: float,
    api_key_env: str | None,
    template: dict[str, Any],
    field: str,
    count: Callable[[Any], int | None],
) -> Callable[[str], int]:
    def count_tokens(text: str) -> int:
        status, payload = _tokenize_call(url, timeout, api_key_env, {**template, field: text})
        found = count(payload) if status == 200 else None
        if found is None:
            raise TokenizeError(_not_a_count(url, status, payload, api_key_env))
        return found

    return count_tokens
