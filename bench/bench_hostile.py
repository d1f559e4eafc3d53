"""The hostile probe's inputs (issue 42, N6 to N8 and the whole-file reads),
each a real ``slogate`` process, checked for what docs/reliability.md
promises of bad input:

    .venv/bin/python bench/bench_hostile.py [--rss-mb 300] [--cases NAME ...]

- the exit code (2: bad input found before any load; 0 for a prune that
  skips what it cannot read) and one line on stderr of at most 2,000 bytes,
  no traceback;
- peak RSS of the process and its children under ``--rss-mb`` (300 MB),
  from the kernel's own count (``wait4``'s ``ru_maxrss``), which no polling
  can miss;
- the time it took, printed (a refusal comes before any work, in about the
  interpreter's start-up).

The files: an agent trace (checked, and run against the exact-schedule
server, which announces no context) with a call of ``in: 10^12`` and one of
``64,000,000`` (3 GB and 2.1 GB before), JSON nested 5,000 deep, 600 nested
subagents, an OTel span that is its own parent's twin, ``hash_ids`` as a
5 MB string (a 5.2 MB error line before), a results root whose
``summary.json`` is 1 GiB (3 GB and 12 s in ``prune`` before) and a run
whose ``data/run.json`` is 1 GiB under ``report`` (both sparse files: the
size is what is refused, no byte is read). It prints one row per case and
exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from slogate.engines.exact import ExactEngine

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "scenarios" / "data" / "agents"
GIB = 1 << 30
MAX_LINE_BYTES = 2000  # a refusal quotes at most 500 characters of a value
CALL = '{"type": "n", "in": 100, "out": 10}'


def weka(change: Callable[[dict], None]) -> str:
    data = json.loads((AGENTS / "coding-session.weka.json").read_text())
    change(data)
    return json.dumps(data)


def nested_subagents(depth: int) -> str:
    text = CALL
    for level in range(depth):
        text = f'{{"type": "subagent", "agent_id": "a{level}", "requests": [{CALL}, {text}]}}'
    return f'{{"block_size": 64, "requests": [{CALL}, {text}]}}'


def otel_twin() -> str:
    data = json.loads((AGENTS / "coding-session.otel.json").read_text())
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[0], "parentSpanId": spans[0]["spanId"]})
    return json.dumps(data)


def calls_of(tokens: int) -> Callable[[dict], None]:
    return lambda d: d["requests"][0].update({"in": tokens, "hash_ids": []})


TRACES: dict[str, Callable[[], str]] = {
    "agent-in-1e12": lambda: weka(calls_of(10**12)),
    "agent-in-64e6": lambda: weka(calls_of(64_000_000)),
    "json-5000-deep": lambda: "[" * 5000 + "]" * 5000,
    "600-subagents": lambda: nested_subagents(600),
    "otel-twin-span": otel_twin,
    "hash-ids-5mb": lambda: weka(lambda d: d["requests"][0].update({"hash_ids": "x" * 5_000_000})),
}


def agent_scenario(folder: Path, name: str, text: str) -> list[str]:
    (folder / f"{name}.json").write_text(text)
    workload = {"kind": "agent-trace", "file": str(folder / f"{name}.json")}
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"workload": workload, "load": {"users": 1, "duration": "5s"}}))
    return ["scenario", "check", str(path)]


def sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def prune_case(folder: Path) -> list[str]:
    sparse(folder / "root" / "huge" / "summary.json", GIB)
    return ["prune", str(folder / "root"), "--keep", "0"]


def report_case(folder: Path) -> list[str]:
    sparse(folder / "run" / "data" / "run.json", GIB)
    return ["report", str(folder / "run")]


def measured(args: list[str]) -> tuple[int, float, float, str]:
    """Exit code, seconds, peak RSS in MB (the process and the children it
    waited for) and stderr of ``slogate ARGS``."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "slogate.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        took = time.monotonic() - start
        err.seek(0)
        return process.returncode, took, usage.ru_maxrss / 1024, err.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rss-mb", type=float, default=300.0)
    parser.add_argument("--cases", nargs="*", help="only these (default: all)")
    options = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp, ExactEngine({"ttft_ms": 5, "itl_ms": 1}) as engine:
        folder = Path(tmp)
        host = ["--host", engine.url]
        cases = [(name, agent_scenario(folder, name, make()), 2) for name, make in TRACES.items()]
        run = [*agent_scenario(folder, "run-in-1e12", TRACES["agent-in-1e12"]())[2:], *host]
        cases += [("run-agent-in-1e12", ["run", *run, "--out", str(folder / "out")], 2)]
        cases += [("prune-1gib-summary", prune_case(folder), 0)]
        cases += [("report-1gib-run-json", report_case(folder), 2)]
        print(f"{'case':22} {'exit':>4} {'took s':>7} {'peak MB':>8} {'stderr B':>8}  checks")
        for name, args, expected in cases:
            if options.cases and name not in options.cases:
                continue
            code, took, peak_mb, stderr = measured(args)
            lines = stderr.strip().splitlines()
            checks = {
                "exit_code": code == expected,
                "one_line": len(lines) == (1 if expected else 0),
                "no_traceback": "Traceback" not in stderr,
                "short": len(stderr) <= MAX_LINE_BYTES,
                "rss": peak_mb < options.rss_mb,
            }
            bad = [check for check, ok in checks.items() if not ok]
            failed |= bool(bad)
            print(f"{name:22} {code:>4} {took:>7.2f} {peak_mb:>8.0f} {len(stderr):>8}  "
                  f"{'ok' if not bad else 'FAILED: ' + ', '.join(bad)}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
