"""The client's chunk times against the kernel's receive stamps of the same
packets, on a real engine (docs/benchmarks-history.md, "vLLM on a quiet host").

    sudo taskset -c 0 .venv/bin/python bench/bench_wire_truth.py --url http://127.0.0.1:8830 \
        [--users 16] [--duration 25s] [--continuous-usage]

Runs ``slogate run --save-requests`` of a fixed workload (completions, 128
tokens in, 64 out, ``ignore_eos``, drained) against the server at ``--url``
while a raw socket on the loopback (``AF_PACKET``, root only) stamps every
packet the server sends (``SO_TIMESTAMPNS``). Each request's stream is found
among the connections' streams by its chunk gaps. Prints one JSON object:

- for the requests whose every token came as an event of its own, each
  chunk's time minus its packet's stamp, relative to the request's first
  chunk (the client's own error; target: within 1 ms);
- how many requests had chunks carrying several tokens (the server merged
  them), and how their tokens were counted (``chunk_token_method``);
- the summary's ITL p99, the chunk gaps' p99 of the one-token-per-event
  requests, and the engine's own ITL p99 bucket (``engine_latency``).

Against a server on another host the capture sees nothing: loopback only.
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_vllm_side_by_side import fixed_run

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35  # also the control message's type
ETH_HEADER = 14
TOKEN_EVENT = b'"text":"'  # one per completions event that carries output
INPUT_TOKENS, OUTPUT_TOKENS = 128, 64


class LoopbackCapture(threading.Thread):
    """Kernel receive stamps (ns, wall clock) of the packets a local server at
    ``port`` sends, with the client port and the output events each holds."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.packets: list[tuple[int, int, int]] = []  # (stamp ns, client port, events)
        self.done = threading.Event()
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.settimeout(0.2)

    def run(self) -> None:
        while not self.done.is_set():
            try:
                data, ancillary, _, address = self.sock.recvmsg(65536, 64)
            except TimeoutError:
                continue
            if address[2] == socket.PACKET_OUTGOING:
                continue  # the loopback shows each packet twice
            packet = self.parse(data)
            stamp = next((_stamp(v) for _, kind, v in ancillary if kind == SO_TIMESTAMPNS), None)
            if packet is not None and stamp is not None:
                self.packets.append((stamp, *packet))

    def parse(self, data: bytes) -> tuple[int, int] | None:
        """(client port, output events) of an IPv4 TCP packet from the server
        that carries a payload; None for any other."""
        ip = data[ETH_HEADER:]
        if ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_TCP:
            return None
        tcp = ip[(ip[0] & 15) * 4 :]
        source, destination = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if source != self.port or not payload:
            return None
        return destination, payload.count(TOKEN_EVENT)

    def streams(self) -> list[np.ndarray]:
        """Each response's output events' stamps: a connection's run of packets
        with output, ended by one without (headers, usage, ``[DONE]``)."""
        by_port: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
        for stamp, port, events in self.packets:
            by_port[port].append((stamp, events))
        streams = []
        for packets in by_port.values():
            current: list[int] = []
            for stamp, events in packets:
                if events:
                    current += [stamp] * events
                elif current:
                    streams.append(np.array(current, dtype=np.int64))
                    current = []
            if current:
                streams.append(np.array(current, dtype=np.int64))
        return streams


def _stamp(value: bytes) -> int:
    seconds, nanoseconds = struct.unpack("qq", value[:16])
    return seconds * 1_000_000_000 + nanoseconds


def compare(requests: list[dict[str, Any]], streams: list[np.ndarray]) -> dict[str, Any]:
    """Match each request whose tokens each came as an event of its own to
    the stream with the same gaps; the client's chunk times minus the
    stamps, each relative to its first chunk (ms)."""
    whole = [s for s in streams if len(s) == OUTPUT_TOKENS]
    wire_gaps = [np.diff(s) / 1e6 for s in whole]
    errors, exact_gaps = [], []
    for request in requests:
        chunks = np.array(request["chunk_ms"])
        if len(chunks) != OUTPUT_TOKENS or not whole:
            continue
        gaps = np.diff(chunks)
        best = min(range(len(whole)), key=lambda i: float(np.abs(gaps - wire_gaps[i]).sum()))
        wire = (whole[best] - whole[best][0]) / 1e6
        errors.append((chunks - chunks[0]) - wire)
        exact_gaps.append(gaps)
    error = np.concatenate(errors) if errors else np.zeros(0)
    return {
        "requests_compared": len(errors),
        "client_minus_kernel_ms": {
            key: round(float(np.percentile(np.abs(error), q)), 3)
            for key, q in (("p50", 50), ("p99", 99), ("max", 100))
        }
        if error.size
        else None,
        "one_event_per_token_itl_p99_ms": round(
            float(np.percentile(np.concatenate(exact_gaps), 99)), 3
        )
        if exact_gaps
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True, help="a server on this host (loopback)")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--duration", default="25s")
    parser.add_argument("--continuous-usage", action="store_true", help="per-chunk usage")
    args = parser.parse_args()
    port = int(args.url.rsplit(":", 1)[1].split("/")[0])
    try:
        capture = LoopbackCapture(port)
    except PermissionError:
        raise SystemExit("the loopback capture needs root (CAP_NET_RAW)") from None
    capture.start()
    with tempfile.TemporaryDirectory() as folder:
        out = fixed_run(
            args.url,
            "wire",
            args.users,
            args.duration,
            (INPUT_TOKENS, OUTPUT_TOKENS),
            Path(folder),
            request={"continuous_usage": args.continuous_usage},
            extra=("--save-requests",),
        )
        time.sleep(0.5)  # the last packets reach the capture
        capture.done.set()
        capture.join()
        if not (out / "summary.json").exists():
            raise SystemExit("slogate run wrote no summary")
        summary = json.loads((out / "summary.json").read_text())
        lines = (out / "requests.jsonl").read_text().splitlines()
        requests = [r for r in map(json.loads, lines) if r["ok"]]
    (measured,) = summary["scenarios"].values()
    engine = (summary.get("engine_latency") or {}).get("itl_ms") or {}
    result = {
        "requests": len(requests),
        "merged": sum(len(r["chunk_ms"]) < r["output_tokens"] for r in requests),
        "chunk_token_method": dict(collections.Counter(r["chunk_token_method"] for r in requests)),
        "itl_p99_ms": measured["metrics"]["itl_ms"]["p99"],
        "engine_itl_p99_bucket_ms": (engine.get("buckets") or {}).get("p99"),
        "itl_mean_minus_engine_ms": engine.get("client_minus_engine"),
        "packets": len(capture.packets),
        "verdict": summary["verdict"],
    } | compare(requests, capture.streams())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
