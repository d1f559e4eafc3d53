"""Images in chat requests: what they add to the prompt and what the vision
encoder costs.

A vision model (Qwen2.5-VL's shape) cuts an image into ``patch_px`` patches,
runs them through its ViT encoder, and merges ``merge`` x ``merge`` patches
into one prompt token. Per image the engine charges the encoder's compute,
2 x ``encoder_params`` FLOPs per patch at the GPU's tensor peak times the
profile's matmul efficiency (the encoder runs before the request is queued:
it does not take steps from other requests, a simplification), and adds one
prompt token per merged tile, which the language model prefills like text.
Tile tokens are ids derived from the image's bytes, so the prefix cache tells
different images apart and recognises a repeated one, as vLLM's does. Only
``data:`` URLs are accepted: the simulated engine downloads nothing.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from PIL import Image, UnidentifiedImageError

from slogate.simengine.profiles import Profile

__all__ = ["ImageError", "image_urls", "vision_cost"]

TOKEN_ID_SPACE = 100_000


class ImageError(ValueError):
    """A request's image cannot be used (answered 400)."""


def image_urls(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``image_url`` parts of every message, in order."""
    urls = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if not isinstance(url, str):
                    raise ImageError("image_url must be a URL string or {url: ...}")
                urls.append(url)
    return urls


def _size(url: str) -> tuple[int, int, bytes]:
    """(width, height, bytes) of a ``data:`` URL image, read from its header."""
    if not url.startswith("data:") or ";base64," not in url:
        raise ImageError("only data:...;base64 image URLs are served (no downloads)")
    try:
        data = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (binascii.Error, UnidentifiedImageError, OSError) as exc:
        raise ImageError(f"an image could not be read: {exc}") from exc
    return width, height, data


def vision_cost(profile: Profile, urls: list[str]) -> tuple[list[int], float]:
    """(prompt token ids the images add, encoder seconds) for ``urls``."""
    if not urls:
        return [], 0.0
    vision = profile.model.vision
    if vision is None:
        raise ImageError(f"the model {profile.model.hf_id} does not accept images")
    encoder_params, patch_px, merge = vision
    tile_px = patch_px * merge
    ids: list[int] = []
    patches = 0
    for url in urls:
        width, height, data = _size(url)
        tiles = math.ceil(width / tile_px) * math.ceil(height / tile_px)
        patches += tiles * merge * merge
        ids.extend([1 + zlib.crc32(data) % TOKEN_ID_SPACE] * tiles)
    flops = 2.0 * encoder_params * patches
    peak = profile.gpu.flops_per_s["bf16"] * profile.tp * profile.efficiency.matmul
    return ids, flops / peak
