"""Starting the llama.cpp server the llama.cpp tests run against, one way for all."""

from __future__ import annotations

import os

import pytest

from slogate.engines.llamacpp import LlamaCppMissing, LlamaServer, LlamaServerConfig

SKIP_ENV = "SLOGATE_SKIP_LLAMACPP"


def llama_server(
    tmp: pytest.TempPathFactory, slots: int, extra: tuple[str, ...] = ()
) -> LlamaServer:
    """A llama-server with its log in a temporary folder (enter it to wait for it).
    ``SLOGATE_SKIP_LLAMACPP=1`` skips the test; a missing binary or model fails
    it, saying how to install them (`make llama-cpp`)."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: llama.cpp end-to-end tests skipped")
    log = tmp.mktemp("llama-server") / "server.log"
    try:
        return LlamaServer(LlamaServerConfig(slots=slots, extra_args=extra), log_path=log)
    except LlamaCppMissing as exc:
        pytest.fail(f"{exc} (or set {SKIP_ENV}=1 to skip these tests)", pytrace=False)
