"""Starting the llama.cpp server the llama.cpp tests run against, one way for all."""

from __future__ import annotations

import pytest
from enginewire import require_engine

from slogate.engines.llamacpp import LlamaServer, LlamaServerConfig, locate

SKIP_ENV = "SLOGATE_SKIP_LLAMACPP"


def require_llama_cpp() -> None:
    """``SLOGATE_SKIP_LLAMACPP=1`` skips the test; a missing binary or model fails
    it, saying how to install them (`make llama-cpp`)."""
    require_engine("llama.cpp", SKIP_ENV, locate)


def llama_server(
    tmp: pytest.TempPathFactory, slots: int, extra: tuple[str, ...] = ()
) -> LlamaServer:
    """A llama-server with its log in a temporary folder (enter it to wait for it),
    or the test skipped or failed as :func:`require_llama_cpp` says."""
    require_llama_cpp()
    log = tmp.mktemp("llama-server") / "server.log"
    return LlamaServer(LlamaServerConfig(slots=slots, extra_args=extra), log_path=log)
