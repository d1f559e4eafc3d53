"""llama.cpp and the CPU vLLM as engines a tune restarts once per treatment.

A tune varies an engine's settings by the names its factors use (llama.cpp:
``parallel``, ``ctx_size``, ``batch_size``, ``ubatch_size``, ``flash_attn``;
vLLM: ``max_num_seqs``, ``max_num_batched_tokens``, ``enable_prefix_caching``,
``enable_chunked_prefill``); here they become the launchers' configurations,
whose own checks then run before any engine starts, so a bad level fails the
whole tune at once, naming the setting, instead of one treatment an hour in.

Between the warm-up and the measurement the engine's caches are emptied, so a
treatment measures its own settings and not the prefixes its warm-up left:
llama.cpp's slots are erased (``POST /slots/{id}?action=erase``), vLLM's prefix
cache reset (``POST /reset_prefix_cache``, a development route: the tune's vLLM
runs with ``VLLM_SERVER_DEV_MODE=1``).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from slogate.engines.llamacpp import (
    SERVER_BATCH_SIZE,
    SERVER_FLASH_ATTN,
    SERVER_UBATCH_SIZE,
    LlamaServer,
    LlamaServerConfig,
)
from slogate.engines.served import ServedEngine
from slogate.engines.tunable import (
    HTTP_TIMEOUT_S,
    CacheResetFailed,
    EngineStartFailed,
    post,
    reset_prefix_cache,
)
from slogate.engines.vllm import VllmServer, VllmServerConfig

TRUE_WORDS = frozenset({"true", "on", "1", "yes"})
FALSE_WORDS = frozenset({"false", "off", "0", "no"})
# vLLM's own defaults on a CPU for an OpenAI server (its arg_utils for the CPU
# platform), reported as the current settings where slogate leaves them unset.
VLLM_CPU_MAX_NUM_SEQS = 128
VLLM_CPU_MAX_NUM_BATCHED_TOKENS = 2048


def positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"setting {name}: {text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"setting {name}: must be at least 1, got {value}")
    return value


def boolean(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"setting {name}: {text!r} is not true or false")


def known_only(settings: Mapping[str, str], known: tuple[str, ...], engine: str) -> None:
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(
            f"{engine} has no setting {unknown[0]!r}; a tune can vary {', '.join(known)}"
        )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
        return json.load(response)


class ServedTreatment:
    """A started llama-server or vLLM as the tune sees it (``RunningTreatment``)."""

    def __init__(
        self, server: ServedEngine, startup_s: float, reset: Callable[[str], None]
    ) -> None:
        self.server = server
        self.url = server.url
        self.startup_s = startup_s
        self._reset = reset

    def reset_caches(self) -> None:
        self._reset(self.url)

    def peak_memory_bytes(self) -> int | None:
        return self.server.peak_rss_bytes()

    def alive(self) -> bool:
        return self.server.running()

    def log_tail(self) -> str:
        return self.server.log_tail()

    def stop(self) -> int | None:
        self.server.peak_rss_bytes()  # the last reading, while its processes are there
        return self.server.stop()


def start_served(
    server: ServedEngine, reset: Callable[[str], None], errors: tuple[type[Exception], ...]
) -> ServedTreatment:
    """Start ``server`` and time it until it serves; EngineStartFailed with its
    log's tail when it exits or misses its deadline."""
    began = time.monotonic()
    try:
        server.start()
    except errors as error:
        raise EngineStartFailed(str(error), server.log_tail()) from None
    return ServedTreatment(server, time.monotonic() - began, reset)


class ServedUnderTune(abc.ABC):
    """What both real engines do for a tune; each says its configuration for
    a treatment's settings, its server, and how its caches are emptied."""

    kind: str

    def __init__(self, cache: Path | None) -> None:
        self.cache = cache  # where the engine is installed (default: engines.served.cache_dir)

    @abc.abstractmethod
    def config(self, settings: Mapping[str, str]) -> Any:
        """The launcher's configuration for ``settings``; ValueError naming a bad one."""

    @abc.abstractmethod
    def server(self, config: Any, log_path: Path) -> ServedEngine:
        """The server of ``config``, not started (the engine missing: its error)."""

    @staticmethod
    @abc.abstractmethod
    def empty_caches(url: str) -> None: ...

    def check(self, settings: Mapping[str, str]) -> None:
        self.config(settings)

    def start(self, settings: Mapping[str, str], log_dir: Path) -> ServedTreatment:
        server = self.server(self.config(settings), log_dir / "engine.log")
        log_dir.mkdir(parents=True, exist_ok=True)
        return start_served(server, self.empty_caches, (server.start_error,))


# -- llama.cpp ---------------------------------------------------------------------------
LLAMACPP_FACTORS = ("parallel", "ctx_size", "batch_size", "ubatch_size", "flash_attn")


def erase_slots(url: str) -> None:
    """Erase every slot's KV cache (llama-server's ``/slots`` route, open with
    ``--slot-save-path``)."""
    try:
        slots = get_json(url + "/slots")
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise CacheResetFailed(f"GET {url}/slots: {error}") from None
    for slot in slots:
        post(f"{url}/slots/{slot['id']}?action=erase")


class LlamaCppUnderTune(ServedUnderTune):
    """llama-server started per treatment from ``base`` with the tune's settings.

    Its prompt cache in RAM (``--cache-ram``) is off: llama-server keeps there
    the prompts of slots that moved on, and no route empties it, so erasing
    the slots would leave a treatment the warm-up's prompts. The command it
    recommends keeps it off too: that is the configuration measured."""

    kind = "llamacpp"
    empty_caches = staticmethod(erase_slots)

    def __init__(self, base: LlamaServerConfig | None = None, cache: Path | None = None) -> None:
        super().__init__(cache)
        self.base = dataclasses.replace(base or LlamaServerConfig(), cache_ram_mib=0)

    def config(self, settings: Mapping[str, str]) -> LlamaServerConfig:
        """The launcher's configuration for ``settings``; ValueError naming a bad one.
        ``ctx_size`` is llama-server's ``-c``, shared by the ``parallel`` slots."""
        known_only(settings, LLAMACPP_FACTORS, "llama.cpp")
        slots = positive_int("parallel", settings.get("parallel", str(self.base.slots)))
        ctx = positive_int("ctx_size", settings.get("ctx_size", str(self.base.ctx_size)))
        if ctx % slots:
            raise ValueError(
                f"setting ctx_size: {ctx} is not a multiple of parallel {slots} "
                "(llama-server gives each slot ctx_size / parallel tokens)"
            )
        changes: dict[str, Any] = {"slots": slots, "ctx_per_slot": ctx // slots}
        for name in ("batch_size", "ubatch_size"):
            if name in settings:
                changes[name] = positive_int(name, settings[name])
        if "flash_attn" in settings:
            changes["flash_attn"] = settings["flash_attn"].strip().lower()
        return dataclasses.replace(self.base, **changes)  # its own checks name the setting

    def server(self, config: LlamaServerConfig, log_path: Path) -> LlamaServer:
        """Its slots' route open (``--slot-save-path`` beside the log) for the erase."""
        slots = log_path.parent / "slots"
        slots.mkdir(parents=True, exist_ok=True)
        configured = dataclasses.replace(config, slot_save_path=slots)
        return LlamaServer(configured, cache=self.cache, log_path=log_path)

    def launch_command(self, settings: Mapping[str, str]) -> str:
        config = self.config(settings)
        words = ["slogate", "engine", "--llama-cpp", "--slots", str(config.slots)]
        words += ["--ctx-per-slot", str(config.ctx_per_slot)]
        for flag, value in config.optional_flags():
            words += [flag, value]
        return shlex.join(words)

    def defaults(self) -> Mapping[str, str]:
        base = self.base
        return {
            "parallel": str(base.slots),
            "ctx_size": str(base.ctx_size),
            "batch_size": str(base.batch_size or SERVER_BATCH_SIZE),
            "ubatch_size": str(base.ubatch_size or SERVER_UBATCH_SIZE),
            "flash_attn": base.flash_attn or SERVER_FLASH_ATTN,
        }


# -- vLLM --------------------------------------------------------------------------------
VLLM_FACTORS = (
    "enforce_eager",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_chunked_prefill",
)


class VllmUnderTune(ServedUnderTune):
    """The CPU vLLM started per treatment from ``base`` with the tune's settings,
    its development routes open for the cache reset."""

    kind = "vllm"
    empty_caches = staticmethod(reset_prefix_cache)

    def __init__(self, base: VllmServerConfig | None = None, cache: Path | None = None) -> None:
        super().__init__(cache)
        self.base = base or VllmServerConfig()

    def config(self, settings: Mapping[str, str]) -> VllmServerConfig:
        """The launcher's configuration for ``settings``; ValueError naming a bad one."""
        known_only(settings, VLLM_FACTORS, "vLLM")
        changes: dict[str, Any] = {"dev_mode": True}
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            if name in settings:
                changes[name] = positive_int(name, settings[name])
        if "enable_prefix_caching" in settings:
            changes["prefix_caching"] = boolean(
                "enable_prefix_caching", settings["enable_prefix_caching"]
            )
        if "enable_chunked_prefill" in settings:
            changes["chunked_prefill"] = boolean(
                "enable_chunked_prefill", settings["enable_chunked_prefill"]
            )
        if "enforce_eager" in settings:
            changes["enforce_eager"] = boolean("enforce_eager", settings["enforce_eager"])
        return dataclasses.replace(self.base, **changes)  # its own checks name the setting

    def server(self, config: VllmServerConfig, log_path: Path) -> VllmServer:
        return VllmServer(config, cache=self.cache, log_path=log_path)

    def launch_command(self, settings: Mapping[str, str]) -> str:
        config = self.config(settings)
        words = ["slogate", "engine", "--vllm", "--max-model-len", str(config.max_model_len)]
        words += ["--cores", ",".join(str(c) for c in config.cores)]
        words += ["--kv-cache-gib", str(config.kv_cache_gib)]
        if config.enforce_eager:
            words.append("--enforce-eager")
        if not config.prefix_caching:
            words.append("--no-enable-prefix-caching")
        return shlex.join(words + config.scheduler_flags())

    def defaults(self) -> Mapping[str, str]:
        base = self.base
        chunked = base.chunked_prefill
        return {
            "max_num_seqs": str(base.max_num_seqs or VLLM_CPU_MAX_NUM_SEQS),
            "max_num_batched_tokens": str(
                base.max_num_batched_tokens or VLLM_CPU_MAX_NUM_BATCHED_TOKENS
            ),
            "enable_prefix_caching": str(base.prefix_caching).lower(),
            "enable_chunked_prefill": "true" if chunked is None else str(chunked).lower(),
            "enforce_eager": str(base.enforce_eager).lower(),
        }
