"""``python -m slogate.exactengine``: serve until SIGTERM/SIGINT; print the URL first."""

from __future__ import annotations

import argparse
import os
import signal
import sys

import orjson

from slogate.exactengine.behaviour import Behaviour
from slogate.exactengine.server import ExactServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m slogate.exactengine", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default="exact-model")
    parser.add_argument("--tokenize", choices=("vllm", "llamacpp", "none"), default="vllm")
    parser.add_argument(
        "--api-key-env", default=None, help="require the key held by this environment variable"
    )
    parser.add_argument(
        "--behaviour",
        default="{}",
        help='default behaviour as JSON, e.g. \'{"ttft_ms": 50, "itl_ms": 20}\'',
    )
    return parser.parse_args(argv)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        behaviour = Behaviour().updated(orjson.loads(args.behaviour), "--behaviour")
    except ValueError as exc:
        print(f"exactengine: {exc}", file=sys.stderr)
        return 2
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    server = ExactServer(behaviour, args.model, args.tokenize, api_key)
    host, port = server.listen(args.host, args.port)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"exactengine listening on http://{host}:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
