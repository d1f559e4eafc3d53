"""The HTTP face of the simulated engine: vLLM's OpenAI-compatible routes.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, the OpenAI
Responses API ``POST /v1/responses`` and the Anthropic Messages API
``POST /v1/messages`` (streaming and not), ``GET /v1/models``,
``POST /tokenize``, ``GET /health``, ``GET /metrics``, vLLM's
``POST /reset_prefix_cache``, and for tests and
benchmarks ``GET|POST|DELETE /admin/faults`` and ``GET /admin/stats[?reset=1]``.
Request validation, error bodies and stream shapes follow vLLM (and Anthropic
for messages), so a client that works here meets no surprise there.
"""

from __future__ import annotations

import asyncio
import os
import random
import resource
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from slogate.simengine import token_io as text
from slogate.simengine.chat_sse import ChunkEncoder, Encoder, SseStream
from slogate.simengine.config import EngineConfig, build_config
from slogate.simengine.embeddings import (
    EmbeddingError,
    embed,
    embedding_reply,
    input_texts,
    tokenize_inputs,
)
from slogate.simengine.engine import Engine, TokenStream
from slogate.simengine.faults import FaultError, FaultInjector, FaultPlan
from slogate.simengine.grammar import (
    Grammars,
    JsonText,
    answer_text,
    answer_tokens,
    constraint_of,
)
from slogate.simengine.kvcache import block_hashes
from slogate.simengine.messages_sse import MessagesEncoder
from slogate.simengine.power import PowerModel
from slogate.simengine.profiles import DEFAULT_PROFILE
from slogate.simengine.receipt import listen, receipt
from slogate.simengine.replies import Reply, whole_body
from slogate.simengine.requests import (
    REQUEST_ID_HEADER,
    ApiError,
    anthropic_messages,
    chat_messages,
    int_field,
    output_limit,
    planned_tool_call,
    reply_id,
    request_priority,
    responses_messages,
    thinking_enabled,
)
from slogate.simengine.response_length import EosDistribution, OutputPlan, plan_output
from slogate.simengine.responses_sse import ResponsesEncoder
from slogate.simengine.scheduler import Sequence
from slogate.simengine.vision import ImageError, image_urls, vision_cost

READY_PREFIX = "SIMENGINE_READY "  # the stdout line launch.py waits for
Tokens = TypeVar("Tokens")  # a tokenizer's output: one text's ids, or each input's


ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}


def error_response(status: int, message: str, kind: str, api: str = "chat") -> web.Response:
    """An error body in the API's shape (OpenAI's, or Anthropic's for messages)."""
    if api == "messages":
        error = {"type": ANTHROPIC_ERRORS.get(status, "api_error"), "message": message}
        body: dict[str, Any] = {"type": "error", "error": error}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


@dataclass
class State:
    """Per-application state: one engine, its faults, text and tokenizer pool."""

    config: EngineConfig
    engine: Engine
    faults: FaultInjector
    prose: text.Prose
    rng: random.Random
    pool: ThreadPoolExecutor
    created: int
    grammars: Grammars  # structured outputs: the compiled grammars' cache
    name: str | None = None  # the replica's name in a deployment (simengine/deployment.py)
    loaded_adapters: dict[str, asyncio.Future[None]] = field(default_factory=dict)

    @property
    def model_names(self) -> frozenset[str]:
        profile = self.config.profile
        base = {self.config.model_name, profile.model.hf_id, profile.model.key}
        return frozenset({*base, *profile.adapter_names})

    async def adapter(self, name: str) -> None:
        """Return once LoRA adapter ``name`` is loaded: the first request for it
        waits the profile's load time (requests meanwhile wait with it), later
        ones nothing."""
        ready = self.loaded_adapters.get(name)
        if ready is None:
            ready = self.loaded_adapters[name] = asyncio.get_running_loop().create_future()
            load_s = self.config.profile.adapter_load_s / self.config.speedup
            asyncio.get_running_loop().call_later(load_s, ready.set_result, None)
        await asyncio.shield(ready)

    async def encode(self, chars: int, fn: Callable[..., Tokens], *args: Any) -> Tokens:
        """Tokenize inline when short, in the pool (GIL released) when long."""
        if chars < text.OFFLOAD_CHARS:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)


STATE = web.AppKey("simengine_state", State)
# A deployment's router serves a request with one replica's state: it puts the
# replica's State on the request under this key (simengine/deployment.py).
ROUTED = "slogate_routed_state"
SERVED_BY = "x-served-by"  # the response header naming the replica that served a request


PREFILLED = "slogate_prefilled"  # disaggregated: the prefill worker's Prefilled


@dataclass(frozen=True)
class Prefilled:
    """A prompt a prefill worker computed: its length and the tokens its prefix cache held."""

    prompt_tokens: int
    cached_tokens: int


def app_state(request: web.Request) -> State:
    """The engine that serves ``request``: the replica the router chose, else the app's own."""
    routed = request.get(ROUTED)
    return routed if isinstance(routed, State) else request.app[STATE]


async def mark_served_by(request: web.Request, response: web.StreamResponse) -> None:
    """Name the serving replica in the response's headers, as routers in front
    of replicas do, so a client can tell the replicas apart."""
    routed = request.get(ROUTED)
    state = routed if isinstance(routed, State) else request.app.get(STATE)
    if state is not None and state.name is not None:
        response.headers[SERVED_BY] = state.name


# -- request parsing ------------------------------------------------------------------
async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


async def _chat_ids(state: State, messages: list[dict[str, Any]], add: bool) -> list[int]:
    return await state.encode(text.prompt_chars(messages), text.encode_chat, messages, add)


async def _prompt_ids(state: State, body: Mapping[str, Any], chat: bool) -> list[int]:
    if chat or "messages" in body:
        messages = chat_messages(body)
        return await _chat_ids(state, messages, bool(body.get("add_generation_prompt", True)))
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return await state.encode(len(prompt), text.encode_text, prompt)
    if isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return prompt
    raise ApiError(400, "prompt must be a string, a list of token ids, or a batch of one of them")


# -- generation -----------------------------------------------------------------------
async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "chat")


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "completions")


async def responses(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "responses")


async def messages(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "messages")


async def _request_ids(
    state: State, body: Mapping[str, Any], conversation: list[dict[str, Any]] | None
) -> list[int]:
    """The prompt's token ids: the conversation's, else the completions prompt's."""
    if conversation is None:
        return await _prompt_ids(state, body, chat=False)
    return await _chat_ids(state, conversation, bool(body.get("add_generation_prompt", True)))


async def prefill(state: State, request: web.Request, api: str) -> Prefilled | None:
    """Disaggregated serving's first half, on a prefill worker: compute the
    prompt (and its first token, as vLLM's disaggregated prefill does with
    ``max_tokens`` 1) and return what the decode worker needs: the prompt's
    length and the tokens this worker's prefix cache held. None for a body
    the decode worker will refuse with its error."""
    try:
        body = await _json_body(request)
        ids = await _request_ids(state, body, _conversation(body, api))
    except ApiError:
        return None
    if not ids or len(ids) >= state.engine.scheduler.max_model_len:
        return None
    profile = state.config.profile
    hashes = block_hashes(ids, profile.block_size) if profile.enable_prefix_caching else ()
    seq = Sequence("prefill-" + uuid.uuid4().hex, len(ids), 1, prompt_hashes=hashes)
    tokens = TokenStream(seq)
    state.engine.submit(seq, state.engine.model_time(receipt(request)))
    try:
        await tokens.wait(1)
    finally:
        state.engine.abort(seq)
    return Prefilled(len(ids), seq.num_cached_tokens or 0)


def _conversation(body: Mapping[str, Any], api: str) -> list[dict[str, Any]] | None:
    """The request's messages in chat's shape (None: a completions prompt)."""
    if api == "responses":
        return responses_messages(body)
    if api == "messages":
        return anthropic_messages(body)
    if api == "chat" or "messages" in body:
        return chat_messages(body)
    return None


def prompt_text(body: Mapping[str, Any], api: str) -> str:
    """The prompt's text as the model reads it, roles included: what a
    prefix-aware router hashes. Empty for a body the engine will refuse."""
    try:
        conversation = _conversation(body, api)
    except ApiError:
        return ""
    if conversation is None:
        prompt = body.get("prompt")
        return prompt if isinstance(prompt, str) else ""
    try:
        return "".join(
            f"{m.get('role')}\n{text.message_text(m.get('content'))}\n" for m in conversation
        )
    except ValueError:
        return ""


def reasoning_length(state: State, body: Mapping[str, Any], api: str, output_tokens: int) -> int:
    """How many of the output's first tokens are reasoning: the model's
    distribution, leaving at least one answer token (the reasoning model's
    budget is the output limit, as with vLLM's ``max_tokens``)."""
    spread = state.config.profile.model.reasoning
    if spread is None or output_tokens < 2 or not thinking_enabled(body, api):
        return 0
    drawn = EosDistribution(*spread).sample(state.rng)
    return min(drawn, output_tokens - 1)


def _check_model(state: State, body: Mapping[str, Any], embedding: bool) -> None:
    """The request names this engine's model (or none), and the model does what
    the route asks: generation, or embeddings."""
    model = body.get("model")
    if model is not None and model not in state.model_names:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError")
    is_embedding = state.config.profile.model.embedding_dimensions is not None
    if is_embedding != embedding:
        task = "embeddings" if embedding else "generation"
        raise ApiError(400, f"The model `{state.config.model_name}` does not support {task}.")


async def embeddings(request: web.Request) -> web.Response:
    state = app_state(request)
    try:
        body = await _json_body(request)
        _check_model(state, body, embedding=True)
        inputs = input_texts(body)
        chars = sum(len(item) for item in inputs)
        ids = await state.encode(chars, tokenize_inputs, inputs)
        max_len = state.engine.scheduler.max_model_len
        too_long = next((i for i, t in enumerate(ids) if len(t) > max_len), None)
        if too_long is not None:
            raise ApiError(
                400, f"input[{too_long}] has {len(ids[too_long])} tokens; the limit is {max_len}"
            )
    except EmbeddingError as exc:
        return error_response(400, str(exc), "BadRequestError")
    except ApiError as exc:
        return error_response(exc.status, str(exc), exc.kind)
    faults = state.faults.draw(1)
    if faults.header_delay_s:
        await asyncio.sleep(faults.header_delay_s)
    if faults.http_status is not None:
        return error_response(faults.http_status, "simulated failure (fault injection)", "Error")
    await embed(state.engine, ids)
    model = state.config.profile.model
    reply = embedding_reply(
        state.config.model_name,
        model.embedding_dimensions or 0,
        sum(map(len, ids)),
        len(ids),
        str(body.get("encoding_format") or "float"),
    )
    return web.Response(body=reply, content_type="application/json")


async def _generate(request: web.Request, api: str) -> web.StreamResponse:
    state = app_state(request)
    received = state.engine.model_time(receipt(request))  # TTFT runs from here, as the client's
    try:
        body = await _json_body(request)
        _check_model(state, body, embedding=False)
        model = body.get("model")
        adapter = model if model in state.config.profile.adapter_names else None
        if adapter is not None:
            await state.adapter(adapter)
        if body.get("n") not in (None, 1):
            raise ApiError(400, "the simulated engine supports n=1 only")
        max_tokens = output_limit(body, api)
        min_tokens = int_field(body, "min_tokens", 0, 0) or 0
        priority = request_priority(body)
        conversation = _conversation(body, api)
        ids = await _request_ids(state, body, conversation)
        if not ids:
            raise ApiError(400, "the prompt is empty")
        try:
            urls = image_urls(conversation or [])
            image_ids, encoder_s = vision_cost(state.config.profile, urls)
        except ImageError as exc:
            raise ApiError(400, str(exc)) from exc
        ids = ids + image_ids
        max_len = state.engine.scheduler.max_model_len
        limit = max_len - len(ids) if max_tokens is None else max_tokens
        if limit < 1 or len(ids) + limit > max_len:
            raise ApiError(
                400,
                f"This model's maximum context length is {max_len} tokens. However, you "
                f"requested {len(ids) + max(limit, 0)} tokens ({len(ids)} in the messages, "
                f"{max(limit, 0)} in the completion). Please reduce the length of the "
                "messages or completion.",
            )
        if min_tokens > limit:
            raise ApiError(400, f"min_tokens ({min_tokens}) must be <= max_tokens ({limit})")
    except ApiError as exc:
        return error_response(exc.status, str(exc), exc.kind, api)

    config = state.config
    plan = plan_output(
        state.rng,
        config.eos,
        limit=limit,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos")),
    )
    thinking = reasoning_length(state, body, api, plan.tokens)
    grammar = constraint_of(body) if api == "chat" else None
    answer = None
    if grammar is not None:  # the answer is the schema's document, no reasoning before it
        answer = answer_text(grammar[1], state.rng)
        needed = answer_tokens(answer)
        plan, thinking = OutputPlan(min(needed, limit), needed <= limit), 0
    faults = state.faults.draw(plan.tokens)
    if faults.header_delay_s:
        await asyncio.sleep(faults.header_delay_s)
    if grammar is not None:
        await state.grammars.ready(grammar[0])  # its compile, on first sight: part of TTFT
    if faults.http_status is not None:
        kinds = {429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError"}
        return error_response(
            faults.http_status,
            "simulated failure (fault injection)",
            kinds[faults.http_status],
            api,
        )

    if encoder_s:
        await asyncio.sleep(encoder_s / config.speedup)  # the vision encoder, per image tile
    profile = config.profile
    hashes = block_hashes(ids, profile.block_size) if profile.enable_prefix_caching else ()
    request_id = reply_id(api, request.headers.get(REQUEST_ID_HEADER))
    seq = Sequence(
        request_id,
        len(ids),
        plan.tokens,
        stops_at_eos=plan.stops_at_eos,
        prompt_hashes=hashes,
        priority=priority,
    )
    prefilled = request.get(PREFILLED)
    if isinstance(prefilled, Prefilled) and prefilled.prompt_tokens == len(ids):
        # the prompt's KV came from the prefill worker: only its last token is
        # computed here, the step that makes the first output token
        seq.num_computed = len(ids) - 1
        seq.num_cached_tokens = prefilled.cached_tokens
    text_start = state.rng.choice(state.prose.word_starts)
    source: text.Prose | JsonText = state.prose
    if answer is not None:
        source, text_start = JsonText(answer, faults.invalid_json), 0
        state.engine.constrain(seq)
    try:
        if body.get("stream"):
            sink = SseStream(
                seq,
                encoder=_encoder(api, body, state, seq, thinking, conversation or []),
                prose=source,
                text_start=text_start,
                interval=config.stream_interval,
                faults=faults,
                first_written=state.engine.first_token_written,
                reasoning_tokens=thinking,
            )
            sink.adapter = adapter
            state.engine.submit(seq, received)
            return await _stream(request, sink)
        tokens = TokenStream(seq)
        tokens.adapter = adapter
        state.engine.submit(seq, received)
        reply = Reply(api, request_id, text_start, thinking)
        return await _whole(request, state, tokens, faults, reply, source)
    except ConnectionResetError:  # the client went away
        return web.Response(status=499)  # never sent: the connection is gone
    finally:
        state.engine.abort(seq)  # no-op when finished; frees blocks if the client left


def _encoder(
    api: str,
    body: Mapping[str, Any],
    state: State,
    seq: Sequence,
    thinking: int,
    conversation: list[dict[str, Any]],
) -> Encoder:
    """The event shapes of ``api`` for one streamed request (``conversation``:
    its messages in chat's shape, which decide whether it calls a tool)."""
    model = state.config.model_name
    tool = planned_tool_call(body, conversation, api)
    if api == "responses":
        return ResponsesEncoder(
            request_id=seq.request_id,
            created=int(time.time()),
            model=model,
            sequence=seq,
            reasoning_tokens=thinking,
            tool=tool,
        )
    if api == "messages":
        return MessagesEncoder(request_id=seq.request_id, model=model, seq=seq, tool=tool)
    options = body.get("stream_options") or {}
    return ChunkEncoder(
        tool=tool,
        chat=api == "chat",
        request_id=seq.request_id,
        created=int(time.time()),
        model=model,
        seq=seq,
        continuous_usage=bool(options.get("continuous_usage_stats")),
        include_usage=bool(options.get("include_usage")),
        reasoning_tokens=thinking,
        speedup=state.config.speedup,
    )


async def _stream(request: web.Request, sink: SseStream) -> web.StreamResponse:
    """Send the headers, let the sink write the chunks, end the body."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    if request.transport is None:
        raise ConnectionResetError("client gone before the stream started")
    chunked = response.headers.get("Transfer-Encoding", "").lower() == "chunked"
    sink.attach(request.transport, chunked)
    if await sink.over in ("done", "error"):
        await response.write_eof()
    return response


async def _whole(
    request: web.Request,
    state: State,
    tokens: TokenStream,
    faults: FaultPlan,
    reply: Reply,
    prose: text.Prose | JsonText,
) -> web.StreamResponse:
    """A non-streamed reply, sent when the sequence is done (or its fault strikes)."""
    seq = tokens.seq
    stop_at = min(p for p in (faults.error_at, faults.cut_at, seq.max_output) if p is not None)
    await tokens.wait(stop_at)
    if faults.stall_at is not None:
        await asyncio.sleep(faults.stall_s)
    if stop_at == faults.error_at:
        return error_response(
            500, "simulated engine error (fault injection)", "InternalServerError", reply.api
        )
    if stop_at == faults.cut_at:
        response = web.StreamResponse()
        await response.prepare(request)
        if request.transport is not None:
            request.transport.close()  # headers sent, body never ends
        return response
    # The EOS token, when the sequence stops on it, has no text.
    text_tokens = seq.max_output - (1 if seq.stops_at_eos else 0)
    thinking = min(reply.reasoning_tokens, text_tokens)
    reasoning = prose.text_slice(reply.text_start, thinking) if thinking else ""
    answer = prose.text_slice(reply.text_start + thinking, text_tokens - thinking)
    finish = seq.finish_reason
    assert finish is not None  # it waited for the last token, which finished it
    model = state.config.model_name
    reply_body = whole_body(
        reply,
        model,
        seq.prompt_len,
        seq.output_len,
        finish,
        reasoning,
        answer,
        seq.num_cached_tokens or 0,
    )
    body = orjson.dumps(reply_body)
    if faults.malformed_at is not None:
        body = body[: len(body) // 2]
    return web.Response(body=body, content_type="application/json")


# -- other routes -----------------------------------------------------------------------
async def models(request: web.Request) -> web.Response:
    state = app_state(request)
    name = state.config.model_name
    card = {
        "id": name,
        "object": "model",
        "created": state.created,
        "owned_by": "slogate-simengine",
        "root": state.config.profile.model.hf_id,
        "parent": None,
        "max_model_len": state.engine.scheduler.max_model_len,
        "permission": [],
    }
    adapters = [
        {**card, "id": adapter, "root": f"/adapters/{adapter}", "parent": name}
        for adapter in state.config.profile.adapter_names
    ]
    return web.json_response({"object": "list", "data": [card, *adapters]}, dumps=_dumps)


async def tokenize(request: web.Request) -> web.Response:
    state = app_state(request)
    try:
        body = await _json_body(request)
        if "messages" not in body and "prompt" not in body:
            raise ApiError(400, "tokenize needs 'prompt' or 'messages'")
        ids = await _prompt_ids(state, body, chat="messages" in body)
    except ApiError as exc:
        return error_response(exc.status, str(exc), exc.kind)
    payload = {
        "count": len(ids),
        "max_model_len": state.engine.scheduler.max_model_len,
        "tokens": ids,
        "token_strs": None,
    }
    return web.json_response(payload, dumps=_dumps)


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def metrics(request: web.Request) -> web.Response:
    body = app_state(request).engine.metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def dcgm_metrics(request: web.Request) -> web.Response:
    """What dcgm-exporter would show for the simulated GPUs (simengine/power.py)."""
    engine = app_state(request).engine
    profile = engine.config.profile
    model = PowerModel(profile.gpu.idle_w, profile.gpu.tdp_w, profile.tp)
    text = model.dcgm_text(
        engine.model_time(), engine.busy_model_s, engine.scheduler.has_work(), profile.gpu.name
    )
    return web.Response(text=text, content_type="text/plain")


async def get_faults(request: web.Request) -> web.Response:
    return web.json_response(app_state(request).faults.faults.as_dict(), dumps=_dumps)


async def post_faults(request: web.Request) -> web.Response:
    """Merge the posted settings into the current ones (``stall_count`` restarts)."""
    state = app_state(request)
    try:
        changes = await _json_body(request)
        state.faults.set(state.faults.faults.updated(changes))
    except ApiError as exc:
        return error_response(exc.status, str(exc), exc.kind)
    except FaultError as exc:
        return error_response(400, str(exc), "BadRequestError")
    return web.json_response(state.faults.faults.as_dict(), dumps=_dumps)


async def delete_faults(request: web.Request) -> web.Response:
    state = app_state(request)
    state.faults.set(type(state.faults.faults)())
    return web.json_response(state.faults.faults.as_dict(), dumps=_dumps)


def reset_prefix_caches(states: Iterable[State]) -> web.Response:
    """Forget each engine's cached prefixes, as vLLM 0.32's development route
    does and answers: ``{"success": false}`` while a sequence still holds
    blocks (the caller may retry), ``{"success": true}`` once every cache is empty."""
    results = [state.engine.scheduler.kv.reset_prefix_cache() for state in states]
    return web.json_response({"success": all(results)})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    """vLLM's ``POST /reset_prefix_cache``: the next request computes its whole
    prompt (a tune resets between treatments)."""
    return reset_prefix_caches([app_state(request)])


async def stats(request: web.Request) -> web.Response:
    reset = request.query.get("reset", "0") not in ("0", "", "false")
    return web.json_response(app_state(request).engine.stats(reset=reset), dumps=_dumps)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


# -- application ------------------------------------------------------------------------
def create_app(
    config: EngineConfig | None = None, *, manage_gc: bool = False, name: str | None = None
) -> web.Application:
    """The aiohttp application of one simulated engine (default profile if None).
    The engine loop starts and stops with the application. ``manage_gc`` hands
    the process's full garbage collections to the engine loop (``engine.py``):
    for a process that serves only this engine. ``name``: a deployment's
    replica, named in every response's ``x-served-by`` header."""
    config = config or build_config(DEFAULT_PROFILE)
    app = web.Application(client_max_size=64 * 1024**2)
    app[STATE] = State(
        config=config,
        engine=Engine(config, manage_gc=manage_gc),
        faults=FaultInjector(config.faults, random.Random(config.seed + 1)),
        prose=text.Prose(),
        rng=random.Random(config.seed),
        pool=ThreadPoolExecutor(max_workers=2, thread_name_prefix="simengine-tokenize"),
        created=int(time.time()),
        grammars=Grammars(config.speedup),
        name=name,
    )
    app.on_response_prepare.append(mark_served_by)

    async def start(app: web.Application) -> None:
        app[STATE].engine.start()

    async def stop(app: web.Application) -> None:
        await app[STATE].engine.stop()
        app[STATE].pool.shutdown(wait=False, cancel_futures=True)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.add_routes(
        [
            web.post("/v1/chat/completions", chat_completions),
            web.post("/v1/completions", completions),
            web.post("/v1/responses", responses),
            web.post("/v1/messages", messages),
            web.post("/v1/embeddings", embeddings),
            web.get("/v1/models", models),
            web.post("/tokenize", tokenize),
            web.get("/health", health),
            web.get("/metrics", metrics),
            web.get("/dcgm/metrics", dcgm_metrics),
            web.get("/admin/faults", get_faults),
            web.post("/admin/faults", post_faults),
            web.delete("/admin/faults", delete_faults),
            web.get("/admin/stats", stats),
            web.post("/reset_prefix_cache", reset_prefix_cache),
        ]
    )
    return app


async def serve(
    config: EngineConfig, host: str, port: int, *, exit_with_stdin: bool = False
) -> None:
    """Serve until SIGINT/SIGTERM (or stdin closing, when asked); print the
    ``SIMENGINE_READY <url>`` line once the socket is bound."""
    raise_open_files_limit()
    runner, server, url = await start_app(create_app(config, manage_gc=True), host, port)
    print(f"simengine: {describe(config)}", file=sys.stderr, flush=True)
    print(f"{READY_PREFIX}{url}", flush=True)
    try:
        await stop_requested(exit_with_stdin)
    finally:
        server.close()
        await runner.cleanup()


def describe(config: EngineConfig) -> str:
    """One line of what the engine simulates, for its log."""
    summary = config.profile.describe()
    return (
        f"{summary['profile']} ({summary['gpu']}), KV cache "
        f"{summary['kv_capacity_tokens']} tokens, max_model_len {summary['max_model_len']}, "
        f"speedup {config.speedup:g}"
    )


async def start_app(
    app: web.Application, host: str, port: int
) -> tuple[web.AppRunner, asyncio.Server, str]:
    """Serve ``app`` on ``host:port`` (0: a free port); its runner, its server
    (close it before the runner's cleanup) and its URL."""
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,  # streams in flight are cut on shutdown, not awaited
    )
    await runner.setup()
    server = await listen(runner, host, port)
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, server, f"http://{url_host}:{bound_port}"


async def stop_requested(exit_with_stdin: bool) -> None:
    """Return on SIGINT or SIGTERM, or (``exit_with_stdin``) when stdin closes:
    a child whose parent died takes no more requests."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if exit_with_stdin:
        fd = sys.stdin.fileno()

        def on_stdin() -> None:
            if not os.read(fd, 4096):
                loop.remove_reader(fd)
                stop.set()

        loop.add_reader(fd, on_stdin)
    await stop.wait()


def raise_open_files_limit() -> None:
    """One socket per stream: a thousand streams need more than the usual 1024
    descriptors (vLLM raises the limit the same way)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def run(
    profile: str = DEFAULT_PROFILE, host: str = "127.0.0.1", port: int = 8000, **overrides: Any
) -> None:
    """Run a simulated engine in the foreground until interrupted. ``overrides``
    are :func:`slogate.simengine.config.build_config` settings (e.g. ``speedup=4``,
    ``max_num_seqs=64``, ``faults={"http_429_rate": 0.1}``)."""
    asyncio.run(serve(build_config(profile, **overrides), host, port))
