"""The streaming client's measurement error and capacity, against the
exact-schedule server, against the targets in BENCHMARKS.md.

    .venv/bin/python bench/bench_client.py accuracy [--streams 1 64 256 1024] [--repeats 3]
    .venv/bin/python bench/bench_client.py capacity [--streams 32 64 96 128] [--itl-ms 1]
    .venv/bin/python bench/bench_client.py memory
    .venv/bin/python bench/bench_client.py urllib [--requests 10]
    .venv/bin/python bench/bench_client.py micro [--requests 300]

accuracy: TTFT 50 ms, ITL 20 ms, 128 tokens; reported TTFT/ITL p50 and p99
minus the truth from the server's log, events/s, client CPU, peak RSS.
capacity: true ITL of ``--itl-ms``, many streams: events/s, client CPU per
event and ITL error, to find the most one process sustains with ITL p99 error
under 1 ms. memory: the same load for 5 s and for 20 s; peak RSS must not grow.
urllib: a tutorial-style urllib ``run_once`` (bench/urllib_run_once.py) and
slogate's client, one stream each, TTFT beside the truth. micro: the per-event
Python cost of parsing and recording, without sockets.

Every selftest runs in a fresh process (``one``), so peak RSS and CPU are its
own; capacity runs give the server a core of its own and the client the rest
(``run_selftest``'s ``separate_cores``), accuracy runs leave placement to the
scheduler. Each
configuration runs ``--repeats`` times and the tables show medians (and the
worst run): the development machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def one(args: argparse.Namespace) -> None:
    """One selftest in this process; prints its result as one JSON line."""
    from slogate.locustfiles.selftest import run_selftest

    result = run_selftest(
        args.streams,
        args.duration,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        tokens=args.tokens,
        kernel_timestamps=not args.read_time,
        separate_cores=args.pin,
    )
    print(json.dumps(result.to_dict()))


def run_one(
    streams: int,
    duration: float,
    ttft_ms: float,
    itl_ms: float,
    tokens: int,
    read_time: bool = False,
    pin: bool = False,
) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "one", "--streams", str(streams), "--duration", str(duration),
        "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--tokens", str(tokens),
    ]  # fmt: skip
    if read_time:
        command.append("--read-time")
    if pin:
        command.append("--pin")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(*columns: str) -> None:
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns), flush=True)


def row(*cells: object) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def errors_of(result: dict[str, Any]) -> dict[str, float]:
    return {f"{c['metric']}_{c['stat']}": c["error_ms"] for c in result["comparisons"]}


def median_and_worst(values: list[float]) -> str:
    worst = max(values, key=abs)
    return f"{statistics.median(values):+.3f} ({worst:+.3f})"


def accuracy(args: argparse.Namespace) -> None:
    table(
        "streams", "TTFT p50 err", "TTFT p99 err", "ITL p50 err", "ITL p99 err", "events/s",
        "client CPU (cores)", "peak RSS MB", "requests",
    )  # fmt: skip
    for streams in args.streams:
        duration = args.duration if streams > 1 else max(args.duration, 20.0)
        runs = [
            run_one(streams, duration, 50, 20, 128, args.read_time) for _ in range(args.repeats)
        ]
        errors = [errors_of(r) for r in runs]
        keys = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99")
        row(
            streams,
            *(median_and_worst([e[k] for e in errors]) for k in keys),
            f"{statistics.median(r['events_per_s'] for r in runs):,.0f}",
            f"{statistics.median(r['client_cores'] for r in runs):.2f}",
            f"{statistics.median(r['peak_rss_mb'] for r in runs):.0f}",
            f"{statistics.median(r['requests'] for r in runs):.0f}",
        )
        print(json.dumps({"streams": streams, "runs": runs}), file=sys.stderr)


def itl_truth_p99(result: dict[str, Any]) -> float:
    return next(
        c["truth_ms"] for c in result["comparisons"] if (c["metric"], c["stat"]) == ("itl", "p99")
    )


def capacity(args: argparse.Namespace) -> None:
    table(
        "streams", "offered events/s", "events/s", "client CPU (cores)", "client us/event",
        "ITL p50 err", "ITL p99 err", "truth ITL p99",
    )  # fmt: skip
    for streams in args.streams:
        runs = [
            run_one(streams, args.duration, 5, args.itl_ms, 256, args.read_time, pin=True)
            for _ in range(args.repeats)
        ]
        errors = [errors_of(r) for r in runs]
        row(
            streams,
            f"{streams * 1000 / args.itl_ms:,.0f}",
            f"{statistics.median(r['events_per_s'] for r in runs):,.0f}",
            f"{statistics.median(r['client_cores'] for r in runs):.2f}",
            f"{statistics.median(1e6 * r['client_cpu_s'] / r['events'] for r in runs):.1f}",
            median_and_worst([e["itl_p50"] for e in errors]),
            median_and_worst([e["itl_p99"] for e in errors]),
            f"{statistics.median(itl_truth_p99(r) for r in runs):.3f}",
        )
        print(json.dumps({"streams": streams, "runs": runs}), file=sys.stderr)


def memory(args: argparse.Namespace) -> None:
    table(
        "duration s", "requests", "events", "RSS after warm-up MB", "RSS at end MB", "peak RSS MB"
    )
    for duration in (5.0, 20.0):
        r = run_one(64, duration, 5, 2, 256)
        row(
            f"{duration:.0f}", r["requests"], r["events"], f"{r['rss_start_mb']:.1f}",
            f"{r['rss_end_mb']:.1f}", f"{r['peak_rss_mb']:.1f}",
        )  # fmt: skip


def urllib(args: argparse.Namespace) -> None:
    """Both measurements, one request at a time, against one server."""
    from bench.urllib_run_once import run_once
    from slogate.client.streaming import StreamClient
    from slogate.engines.exact import ExactEngine
    from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

    prompt = "Explain how a neural network learns."
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine:
        urllib_ttft = []
        for _ in range(args.requests):
            out = run_once(engine.url + "/v1/chat/completions", prompt, engine.model, 128)
            urllib_ttft.append(out["first_ns"] - out["start_ns"])
        urllib_truth = [t.ttft_ns for t in engine.truth()]
        client = StreamClient(engine.url, "chat", engine.model, RequestOptions(), Timeouts(), 1)
        turn = PlannedTurn("urllib", 0, 0, prompt, 128, 6, 128)
        ours = [client.send(turn).record for _ in range(args.requests)]
        client.close()
        ours_truth = [t.ttft_ns for t in engine.truth()]
    rows = [
        ("tutorial run_once (urllib)", urllib_ttft, urllib_truth),
        ("slogate StreamClient", [r.chunk_ns[0] - r.start_ns for r in ours], ours_truth),
    ]
    table("client", "TTFT median ms", "truth median ms", "error median ms", "error max ms")
    for name, reported, truth in rows:
        error = [(a - b) / 1e6 for a, b in zip(reported, truth, strict=True)]
        row(
            name,
            f"{statistics.median(reported) / 1e6:.3f}",
            f"{statistics.median(truth) / 1e6:.3f}",
            f"{statistics.median(error):+.3f}",
            f"{max(error, key=abs):+.3f}",
        )


def micro(args: argparse.Namespace) -> None:
    """The per-event Python cost without sockets: one recorded 128-token stream
    replayed through the SSE parser and the interpreter, then the recorder, and
    the HDR recording of its ITL and chunk gaps one value at a time (as before
    batching) against ``record_many_ns``."""
    import time

    from slogate.analysis.measurement.histograms import HistogramSet
    from slogate.analysis.measurement.recorder import Recorder
    from slogate.analysis.measurement.request_metrics import request_metrics
    from slogate.locustfiles.event_cost import chat_stream, parse_stream

    reads = chat_stream(128)
    n = args.requests
    started = time.perf_counter()
    for _ in range(n):
        record = parse_stream(reads, "micro")
    parsed = time.perf_counter()
    recorder = Recorder()
    for _ in range(n):
        recorder.record(record, 0.0)
    recorded = time.perf_counter()
    m = request_metrics(record)
    one, batch = HistogramSet(), HistogramSet()
    for _ in range(n):
        for gap, k in m.itl_ns:
            one.record_ns("itl", gap, k)
        for gap in m.chunk_gaps_ns:
            one.record_ns("chunk_gap", gap)
    singly = time.perf_counter()
    for _ in range(n):
        batch.record_many_ns("itl", [g for g, _ in m.itl_ns], [k for _, k in m.itl_ns])
        batch.record_many_ns("chunk_gap", m.chunk_gaps_ns)
    batched = time.perf_counter()
    per_event = 1e6 / (n * len(record.chunk_ns))
    table("step", "us per output event")
    row("SSE parse + JSON + record fill", f"{(parsed - started) * per_event:.2f}")
    row("Recorder.record (metrics + all histograms)", f"{(recorded - parsed) * per_event:.2f}")
    row("ITL + chunk-gap HDR, one value at a time", f"{(singly - recorded) * per_event:.2f}")
    row("ITL + chunk-gap HDR, record_many_ns", f"{(batched - singly) * per_event:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    single = sub.add_parser("one")
    single.add_argument("--streams", type=int, required=True)
    single.add_argument("--duration", type=float, required=True)
    single.add_argument("--ttft-ms", type=float, required=True)
    single.add_argument("--itl-ms", type=float, required=True)
    single.add_argument("--tokens", type=int, required=True)
    single.add_argument("--read-time", action="store_true")
    single.add_argument("--pin", action="store_true", help="client on CPU 0, server on CPU 1")
    for name, streams, duration in (
        ("accuracy", [1, 64, 256, 1024], 10.0),
        ("capacity", [32, 64, 96, 128], 4.0),
    ):
        command = sub.add_parser(name)
        command.add_argument("--streams", type=int, nargs="+", default=streams)
        command.add_argument("--duration", type=float, default=duration)
        command.add_argument("--repeats", type=int, default=3)
        command.add_argument("--itl-ms", type=float, default=1.0)
        command.add_argument(
            "--read-time",
            action="store_true",
            help="time events when the read returns, not by the kernel's receive timestamp",
        )
    sub.add_parser("memory")
    micro_parser = sub.add_parser("micro")
    micro_parser.add_argument("--requests", type=int, default=300)
    urllib_parser = sub.add_parser("urllib")
    urllib_parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    commands = {"one": one, "accuracy": accuracy, "capacity": capacity, "memory": memory}
    commands.update(urllib=urllib, micro=micro)
    commands[args.command](args)


if __name__ == "__main__":
    main()
