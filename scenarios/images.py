"""Images for vision requests, made here: no downloads.

A scenario's ``images:`` section asks for ``count`` images per request at one
resolution and format. Each image is drawn from a small seeded pool (a smooth
gradient with seeded noise, so JPEG and PNG sizes are those of a photo rather
than of a flat colour or pure noise) and sent inline as a ``data:`` URL, the
way clients send local images. The pool is made once per process and shared
by every request that sends it.
"""

from __future__ import annotations

import base64
import io
from functools import cache
from typing import TYPE_CHECKING

from PIL import Image

from slogate.scenarios.model import ImageSpec

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

__all__ = ["POOL_SIZE", "ImageSpec", "image_pool"]

POOL_SIZE = 8
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def _picture(width: int, height: int, seed: int) -> np.ndarray:
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    scale = rng.uniform(2, 8, 3) * np.pi / max(width, height)
    channels = [127 + 100 * np.sin(scale[c] * (x + (c + 1) * y) + phase[c]) for c in range(3)]
    noise = rng.normal(0, 12, (height, width, 3)).astype(np.float32)
    return np.clip(np.stack(channels, axis=-1) + noise, 0, 255).astype(np.uint8)


@cache
def image_pool(width: int, height: int, fmt: str, seed: int) -> tuple[str, ...]:
    """``POOL_SIZE`` distinct images as ``data:`` URLs (made once, then shared)."""
    urls = []
    for k in range(POOL_SIZE):
        buffer = io.BytesIO()
        image = Image.fromarray(_picture(width, height, seed * POOL_SIZE + k), "RGB")
        image.save(buffer, format=fmt.upper(), **({"quality": 85} if fmt == "jpeg" else {}))
        encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
        urls.append(f"data:{MEDIA_TYPES[fmt]};base64,{encoded}")
    return tuple(urls)
