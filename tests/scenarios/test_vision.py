"""Images: made locally at the scenario's resolution and format, sent as data:
URLs in each API's image parts, counted by the engine (tokens per tile,
encoder time)."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterator

import pytest
from PIL import Image

from slogate import scenarios
from slogate.analysis.measurement.records import ErrorKind
from slogate.client.protocol import chat_messages
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.images import POOL_SIZE, image_pool
from slogate.scenarios.model import Api, PlannedTurn, RequestOptions, Timeouts
from slogate.scenarios.planner import Planner
from slogate.simengine.profiles import load_profile
from slogate.simengine.vision import vision_cost

APIS: list[Api] = ["chat", "responses", "messages"]


def decode(url: str) -> Image.Image:
    header, data = url.split(",", 1)
    assert header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(data)))


@pytest.mark.parametrize(("fmt", "kind"), [("jpeg", "JPEG"), ("png", "PNG"), ("webp", "WEBP")])
def test_pool_images_have_the_asked_size_and_format(fmt: str, kind: str) -> None:
    pool = image_pool(320, 200, fmt, 7)
    assert len(pool) == POOL_SIZE == len(set(pool))  # distinct images
    assert pool[0].startswith(f"data:image/{fmt};base64,")
    image = decode(pool[0])
    assert (image.size, image.format) == ((320, 200), kind)


def test_vision_scenario_sends_images_with_the_first_turn() -> None:
    [s] = scenarios.load("vision")
    turns = Planner(s, seed=0).conversation().turns
    assert len(turns[0].images) == 2
    assert all(t.images == () for t in turns[1:])
    parts = chat_messages(turns[0])[-1]["content"]
    assert parts[0] == {"type": "text", "text": turns[0].user_text}
    assert [p["type"] for p in parts[1:]] == ["image_url", "image_url"]
    assert decode(parts[1]["image_url"]["url"]).size == (1024, 768)


def test_encoder_cost_and_tokens_per_tile() -> None:
    profile = load_profile("qwen2.5-vl-7b@h100")
    url = image_pool(1024, 768, "jpeg", 0)[0]
    ids, seconds = vision_cost(profile, [url, url])
    tiles = math.ceil(1024 / 28) * math.ceil(768 / 28)
    assert len(ids) == 2 * tiles
    assert len(set(ids)) == 1  # the same image: the same tile ids (prefix cache hits)
    peak = profile.gpu.flops_per_s["bf16"] * profile.efficiency.matmul
    assert seconds == pytest.approx(2 * 6.7e8 * 2 * tiles * 4 / peak)


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine("qwen2.5-vl-7b@h100", speedup=4)
    try:
        yield running
    finally:
        running.stop()


def send(
    url: str,
    images: tuple[str, ...],
    model: str = "Qwen/Qwen2.5-VL-7B-Instruct",
    api: Api = "chat",
):
    client = StreamClient(url, api, model, RequestOptions(ignore_eos=True), Timeouts(), 1)
    try:
        return client.send(PlannedTurn("v", 0, 0, "describe this", 8, 4, 8, images=images))
    finally:
        client.close()


@pytest.mark.parametrize("api", APIS)
def test_engine_counts_image_tokens_in_usage(engine: EngineProcess, api: Api) -> None:
    """Each API carries images its own way (chat ``image_url`` parts, Responses
    ``input_image``, Messages ``image`` blocks with a base64 source); the engine
    charges the same tile tokens for each."""
    pool = image_pool(448, 448, "png", 3)
    model = "Qwen/Qwen2.5-VL-7B-Instruct"
    plain = send(engine.url, (), model, api).record
    one = send(engine.url, pool[:1], model, api).record
    two = send(engine.url, pool[:2], model, api).record
    for rec in (plain, one, two):
        assert rec.ok, rec.error_message
    per_image = (448 // 28) ** 2
    assert one.input_tokens - plain.input_tokens == per_image
    assert two.input_tokens - plain.input_tokens == 2 * per_image


@pytest.mark.parametrize("api", APIS)
def test_engine_refuses_image_urls_it_would_download(engine: EngineProcess, api: Api) -> None:
    rec = send(engine.url, ("https://example.com/cat.png",), api=api).record
    assert rec.error is ErrorKind.HTTP_4XX
    assert "no downloads" in rec.error_message


def test_text_model_refuses_images() -> None:
    with start_engine("llama-3.1-8b@h100", speedup=4) as text_only:
        rec = send(
            text_only.url, image_pool(64, 64, "png", 0)[:1], "meta-llama/Llama-3.1-8B-Instruct"
        ).record
    assert rec.error is ErrorKind.HTTP_4XX
    assert "does not accept images" in rec.error_message
