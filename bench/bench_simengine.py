"""Does the simulated engine keep real time with 1,024 concurrent streams?

Starts the engine in a child process pinned to one CPU, opens N streaming
completions from a lean client (raw HTTP/1.1 on keep-alive sockets, pinned to
another CPU, each stream re-sent as soon as it ends), and after a warm-up
reads the engine's own timing from ``/admin/stats``: how late each step woke
up relative to its modelled deadline (p50/p99/max), steps per second, tokens
per second and the CPU the engine used, and how long the engine waited for a
CPU behind other processes (the machine's share of the lateness).

    .venv/bin/python bench/bench_simengine.py --streams 1024 --duration 15
    .venv/bin/python bench/bench_simengine.py --realtime   # on a shared machine

The pass mark (BENCHMARKS.md): step lateness p99 under 2 ms on one core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import socket
import sys
import time

from slogate.engines.simulated import EngineProcess, start_engine

END = b"\r\n0\r\n\r\n"  # the last chunk of a chunked HTTP body


class Client:
    """Keeps N keep-alive connections streaming; each re-sends when its stream ends.

    Deliberately cheap, so the engine, not the client, is what is measured: it
    polls all sockets every ``poll_s`` and drains whatever arrived, so several
    events share one ``recv`` and the client stays well under one core (on a
    small VM the two processes otherwise compete for the same host CPU time)."""

    def __init__(self, host: str, port: int, requests: list[bytes], streams: int) -> None:
        self.requests = requests
        self.selector = selectors.DefaultSelector()
        self.tails: dict[socket.socket, bytes] = {}
        self.events = 0
        self.completed = 0
        for _ in range(streams):
            sock = socket.create_connection((host, port))
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ)
            self.tails[sock] = b""
            self.send(sock)

    def send(self, sock: socket.socket) -> None:
        sock.sendall(random.choice(self.requests))  # small: fits the socket buffer

    def run(self, seconds: float, poll_s: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for key, _ in self.selector.select(timeout=poll_s):
                sock = key.fileobj
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("the engine closed a stream")
                self.events += data.count(b"data: ")
                window = self.tails[sock] + data
                self.tails[sock] = window[-16:]
                if END in window:
                    self.completed += 1
                    self.tails[sock] = b""
                    self.send(sock)
            time.sleep(poll_s)

    def close(self) -> None:
        for sock in self.tails:
            sock.close()


def build_request(host: str, port: int, input_tokens: int, output_tokens: int) -> bytes:
    body = json.dumps(
        {
            "prompt": [1000 + i for i in range(input_tokens)],
            "max_tokens": output_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def run_queue_delay_s(pid: int) -> float:
    """Time the process waited, runnable, for a CPU (Linux ``schedstat``): how
    much of the lateness the machine, not the engine, caused."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


def measure(url: str, args: argparse.Namespace, engine: EngineProcess) -> dict:
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    # Output lengths spread over [output/2, 3 output/2] so that streams end, and
    # new requests arrive, at different times, as in a real load.
    lengths = range(args.output // 2, args.output * 3 // 2 + 1, max(1, args.output // 32))
    requests = [build_request(host, int(port), args.input, n) for n in lengths]
    client = Client(host, int(port), requests, args.streams)
    try:
        client.run(args.warmup, args.poll_ms / 1e3)
        engine.stats(reset=True)
        events0, wall0, cpu0 = client.events, time.monotonic(), time.process_time()
        delay0 = run_queue_delay_s(engine.pid)
        client.run(args.duration, args.poll_ms / 1e3)
        stats = engine.stats()
        stats["run_queue_delay_s"] = run_queue_delay_s(engine.pid) - delay0
        wall = time.monotonic() - wall0
        return {
            "engine": stats,
            "client": {
                "events_per_s": (client.events - events0) / wall,
                "cpu_cores": (time.process_time() - cpu0) / wall,
                "streams_completed": client.completed,
            },
        }
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="llama-3.1-8b@h100")
    parser.add_argument("--streams", type=int, default=1024)
    parser.add_argument("--input", type=int, default=128, help="prompt tokens")
    parser.add_argument("--output", type=int, default=256, help="mean output tokens per stream")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds measured")
    parser.add_argument("--stream-interval", type=int, default=1)
    parser.add_argument("--poll-ms", type=float, default=50.0, help="client poll interval")
    parser.add_argument("--engine-cpu", type=int, default=0, help="-1: do not pin")
    parser.add_argument("--client-cpu", type=int, default=1, help="-1: do not pin")
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run the engine under SCHED_FIFO (root): a core of its own on a shared machine",
    )
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    engine = start_engine(args.profile, stream_interval=args.stream_interval)
    try:
        if args.realtime:
            os.sched_setscheduler(engine.pid, os.SCHED_FIFO, os.sched_param(10))
        if args.engine_cpu >= 0:
            os.sched_setaffinity(engine.pid, {args.engine_cpu})
        if args.client_cpu >= 0:
            os.sched_setaffinity(0, {args.client_cpu})
        result = measure(engine.url, args, engine)
    finally:
        engine.stop()

    stats, client = result["engine"], result["client"]
    late = stats["step_lateness_ms"]
    print(
        f"profile {args.profile}, {args.streams} streams of {args.input}/{args.output} tokens, "
        f"stream interval {args.stream_interval}, {args.duration:g} s measured"
        + (", engine under SCHED_FIFO" if args.realtime else "")
    )
    print(
        f"engine: {stats['steps'] / stats['wall_s']:.1f} steps/s, "
        f"{stats['generation_tokens'] / stats['wall_s']:,.0f} tokens/s, "
        f"{stats['running']} running, {stats['waiting']} waiting, "
        f"CPU {stats['cpu_cores']:.2f} cores"
    )
    print(
        f"step lateness ms: p50 {late['p50']:.3f}  p90 {late['p90']:.3f}  "
        f"p99 {late['p99']:.3f}  max {late['max']:.3f}  ({late['count']} steps)"
    )
    print(
        f"client: {client['events_per_s']:,.0f} SSE events/s, CPU {client['cpu_cores']:.2f} cores"
    )
    print(
        f"machine: load average {load_before:.2f} before start, {os.cpu_count()} CPUs; "
        f"engine waited {stats['run_queue_delay_s'] * 1e3:.0f} ms in the run queue "
        f"({stats['run_queue_delay_s'] * 1e3 / max(1, stats['steps']):.2f} ms per step)"
    )
    ok = late["p99"] < 2.0 and stats["cpu_cores"] < 1.0
    print("PASS" if ok else "FAIL", "(p99 lateness < 2 ms on one core)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
