"""The load generator's own error, from what every load process measured of itself.

Each load process watches its event loop while the run is measured
(``locustfiles/loopwatch.py``): a ticker due every millisecond records how late
it ran, with the ticks a stall swallowed filled in, so the histogram holds one
sample per millisecond of wall time with a request in flight: the delay an
output chunk arriving at a random instant waited before the process could
read it. ``gc.callbacks``
counts the cyclic collector's pauses. The histograms of all processes merge
exactly (every process reads its own share of the chunks).

Why the loop's delay bounds the error of TTFT and ITL: a chunk is timed by the
kernel's receive timestamp of the read that returned it (docs/load.md,
"Measurement"), so a late read times it right unless the next chunk arrived
before the read; then both carry the later instant. The error of one TTFT or
inter-token sample is therefore at most the delay of the read that timed it
(later for TTFT; later or earlier for a gap), and a percentile, the max or the
mean of the samples moves by at most the same statistic of the delays when
the delays are independent of the latencies. That statistic is the run's
error bound for an SLO on it: a latency verdict whose margin is smaller is not
trusted (``slogate.analysis.verdict.slo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from slogate.analysis.measurement.histograms import decode_histogram, new_histogram, recorded
from slogate.scenarios.metrics import ITL, TTFT

US_PER_MS = 1000.0
NS_PER_MS = 1e6
STALL_PERCENTILES = {"p50": 50.0, "p99": 99.0}
BOUND_STATS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
# Metrics whose error a loop stall bounds as above: TTFT and the gap-based ones.
BOUNDED_METRICS = (TTFT.key, ITL.key)
# A process this busy cannot read its sockets promptly: Locust warns at 90%.
BUSY_CPU_SHARE = 0.85
# Held time the loop's thread was neither running nor waiting for a core: a
# hypervisor taking the core looks like a stop to it (``held_line`` gives the
# machine's steal over the window).
COLLECTOR = "the cyclic collector's pauses"
NEITHER = (
    "neither running nor waiting: stopped (SIGSTOP), blocked in the kernel or its core "
    "taken by a hypervisor"
)


@dataclass(slots=True)
class ProcessHealth:
    """What one load process measured of itself over the measured window.

    ``stall`` is the loop-delay histogram in microseconds; ``gc_collections``
    counts the collector's passes by generation, ``gc_max_pause_ns`` and
    ``gc_total_pause_ns`` their longest and summed pauses; ``cpu_s`` the
    process's CPU time over ``wall_s`` of wall time.

    ``held_ns`` sums the stalls (ticks more than a millisecond late) and, where
    the kernel tells (``held_split``: Linux schedstat of the loop's thread),
    how much of that time the loop's thread spent running (its own work, the
    collector) and waiting for a core (other processes had them); the rest it
    was neither: stopped (SIGSTOP), blocked in the kernel, or on a virtual
    machine its core was taken by the hypervisor (steal: the kernel bills that
    time to no thread). ``steal_share`` is the machine's share of CPU time its
    hypervisor took over the window (None where the kernel does not tell), so
    that part of "neither" can be told from a stop or a block."""

    stall: HdrHistogram = field(default_factory=new_histogram)
    gc_collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    gc_max_pause_ns: int = 0
    gc_total_pause_ns: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    pid: int | None = None
    held_ns: int = 0
    held_running_ns: int = 0
    held_waiting_ns: int = 0
    held_split: bool = False
    steal_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON form that :meth:`from_dict` reads back exactly (for shipping and saving)."""
        return {
            "pid": self.pid,
            "loop_stall_hdr": self.stall.encode().decode("ascii")
            if self.stall.get_total_count()
            else None,
            "gc_collections": list(self.gc_collections),
            "gc_max_pause_ns": self.gc_max_pause_ns,
            "gc_total_pause_ns": self.gc_total_pause_ns,
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "held_ns": self.held_ns,
            "held_running_ns": self.held_running_ns,
            "held_waiting_ns": self.held_waiting_ns,
            "held_split": self.held_split,
            "steal_share": self.steal_share,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessHealth:
        encoded = data.get("loop_stall_hdr")
        return cls(
            stall=decode_histogram(encoded) if encoded else new_histogram(),
            gc_collections=list(data.get("gc_collections") or [0, 0, 0]),
            gc_max_pause_ns=int(data.get("gc_max_pause_ns") or 0),
            gc_total_pause_ns=int(data.get("gc_total_pause_ns") or 0),
            cpu_s=float(data.get("cpu_s") or 0.0),
            wall_s=float(data.get("wall_s") or 0.0),
            pid=data.get("pid"),
            held_ns=int(data.get("held_ns") or 0),
            held_running_ns=int(data.get("held_running_ns") or 0),
            held_waiting_ns=int(data.get("held_waiting_ns") or 0),
            held_split=bool(data.get("held_split")),
            steal_share=data.get("steal_share"),
        )

    def add(self, other: ProcessHealth) -> None:
        """Merge another process in: its delays and pauses are the run's too."""
        if other.stall.get_total_count():
            self.stall.add(other.stall)
        self.gc_collections = [
            a + b for a, b in zip(self.gc_collections, other.gc_collections, strict=True)
        ]
        self.gc_max_pause_ns = max(self.gc_max_pause_ns, other.gc_max_pause_ns)
        self.gc_total_pause_ns += other.gc_total_pause_ns
        self.cpu_s += other.cpu_s
        self.wall_s = max(self.wall_s, other.wall_s)
        self.held_split = self.held_split and other.held_split
        self.held_ns += other.held_ns
        self.held_running_ns += other.held_running_ns
        self.held_waiting_ns += other.held_waiting_ns
        shares = [s for s in (self.steal_share, other.steal_share) if s is not None]
        self.steal_share = max(shares, default=None)  # one machine's: windows overlap

    def note_held(self, late_ns: int, running_ns: int | None, waiting_ns: int | None) -> None:
        """One stall of ``late_ns``; ``running_ns`` and ``waiting_ns`` are the
        loop thread's time on a core and waiting for one over the same ticks
        (None where the kernel does not tell), capped at the stall."""
        self.held_ns += late_ns
        if running_ns is None or waiting_ns is None:
            return
        waiting = min(waiting_ns, late_ns)
        self.held_waiting_ns += waiting
        self.held_running_ns += min(running_ns, late_ns - waiting)

    @property
    def measured(self) -> bool:
        count: int = self.stall.get_total_count()
        return count > 0


def processes(meta: Mapping[str, Any]) -> dict[str, ProcessHealth]:
    """Each load process's health as the run saved it (``meta.generator.health``)."""
    saved = (meta.get("generator") or {}).get("health") or {}
    return {name: ProcessHealth.from_dict(data) for name, data in sorted(saved.items())}


def merged(per_process: Mapping[str, ProcessHealth]) -> ProcessHealth | None:
    """All processes together; None when no process measured its loop (an older
    results folder, or a run stopped before its measured window)."""
    measured = [p for p in per_process.values() if p.measured]
    if not measured:
        return None
    total = ProcessHealth(held_split=True)  # split only if every process's is
    for health in measured:
        total.add(health)
    return total


def error_bound_ms(health: ProcessHealth, percentile: float | None, stat: str) -> float | None:
    """The error bound of an SLO statistic: the loop delays' percentile for a
    percentile, their max for ``max``, their mean for ``mean`` (module doc)."""
    if not health.measured:
        return None
    if percentile is not None:
        at_percentile: float = recorded(health.stall).value_at_percentile(percentile)
        return at_percentile / US_PER_MS
    if stat == "max":
        most: float = health.stall.get_max_value()
        return most / US_PER_MS
    if stat == "mean":
        mean: float = recorded(health.stall).mean()
        return mean / US_PER_MS
    return None


def likely_cause(per_process: Mapping[str, ProcessHealth], total: ProcessHealth) -> str:
    """What held the loop: measured, where the kernel told how the held time was
    spent; else from the numbers at hand (the collector, the process's own CPU,
    or something outside it). A long collector pause is no cause by its length
    alone: a pass that waited most of its time for a core was held by the
    processes that had the cores, so where the split is measured it decides."""
    worst_max = total.stall.get_max_value() / US_PER_MS
    collector = total.gc_max_pause_ns / NS_PER_MS >= worst_max / 2
    if total.held_split and total.held_ns > 0:
        return held_cause(total, collector)
    if collector:
        return COLLECTOR
    busiest = max((h.cpu_s / h.wall_s for h in per_process.values() if h.wall_s > 0), default=0.0)
    if busiest > BUSY_CPU_SHARE:
        return f"its own CPU ({busiest:.2f} of a core in its busiest process)"
    return (
        f"something outside it (its busiest process used {busiest:.2f} of a core): "
        "other work on the machine, or the process was stopped"
    )


def held_cause(health: ProcessHealth, collector: bool) -> str:
    """The largest share of the held time, named with the split's numbers; the
    loop's own work is the collector's when its pauses were as long as the
    stalls (``collector``)."""
    held = health.held_ns
    other = held - health.held_running_ns - health.held_waiting_ns
    own_work = COLLECTOR + " (the loop's own work)" if collector else "its own work on the loop"
    shares = (
        (health.held_waiting_ns, "waiting for a core that other processes had"),
        (health.held_running_ns, own_work),
        (other, NEITHER),
    )
    share, what = max(shares, key=lambda s: s[0])
    return (
        f"{what} ({share / NS_PER_MS:.1f} of {held / NS_PER_MS:.1f} ms the loop was held: "
        f"{held_line(health)})"
    )


def held_line(health: ProcessHealth) -> str:
    running, waiting = health.held_running_ns / NS_PER_MS, health.held_waiting_ns / NS_PER_MS
    other = health.held_ns / NS_PER_MS - running - waiting
    line = f"running {running:.1f} ms, waiting for a core {waiting:.1f} ms, neither {other:.1f} ms"
    if health.steal_share:
        line += f"; the hypervisor took {health.steal_share:.1%} of the machine's CPU time"
    return line


def generator_reason(per_process: Mapping[str, ProcessHealth]) -> str | None:
    """One line naming the generator's own numbers, for an invalid verdict."""
    total = merged(per_process)
    if total is None:
        return None
    s, g = stall_block(total), gc_block(total)
    return (
        f"load generator: its loop stalled p50 {s['p50']:.3f} ms, p99 {s['p99']:.3f} ms, "
        f"max {s['max']:.3f} ms over {len(per_process)} process(es); collector "
        f"{g['collections']} passes, longest {g['max_pause_ms']:.3f} ms; "
        f"likely cause: {likely_cause(per_process, total)}"
    )


def stall_block(health: ProcessHealth) -> dict[str, Any]:
    """``loop_stall_ms``: the loop delays' p50, p99, max and mean, and how many
    milliseconds of wall time they sample."""
    if not health.measured:
        return {"p50": None, "p99": None, "max": None, "mean": None, "samples": 0}
    view = recorded(health.stall)
    block: dict[str, Any] = {
        key: round(view.value_at_percentile(p) / US_PER_MS, 3)
        for key, p in STALL_PERCENTILES.items()
    }
    block["max"] = round(health.stall.get_max_value() / US_PER_MS, 3)
    block["mean"] = round(view.mean() / US_PER_MS, 3)
    block["samples"] = view.total
    return block


def held_block(health: ProcessHealth) -> dict[str, Any]:
    """``loop_held_ms``: the stalls' total time and, where measured, how the loop's
    thread spent it (``null`` parts where the kernel does not tell)."""
    split = health.held_split
    held = health.held_ns / NS_PER_MS
    running = health.held_running_ns / NS_PER_MS if split else None
    waiting = health.held_waiting_ns / NS_PER_MS if split else None
    return {
        "total": round(held, 3),
        "running": None if running is None else round(running, 3),
        "waiting_for_cpu": None if waiting is None else round(waiting, 3),
        "stopped_or_blocked": (
            None if running is None or waiting is None else round(held - running - waiting, 3)
        ),
        "machine_steal_share": None if health.steal_share is None else round(health.steal_share, 4),
    }


def gc_block(health: ProcessHealth) -> dict[str, Any]:
    """The collector's passes during the measured window and their pauses."""
    return {
        "collections": sum(health.gc_collections),
        "by_generation": list(health.gc_collections),
        "max_pause_ms": round(health.gc_max_pause_ns / NS_PER_MS, 3),
        "total_pause_ms": round(health.gc_total_pause_ns / NS_PER_MS, 3),
    }


def bounds_block(health: ProcessHealth) -> dict[str, dict[str, float | None]]:
    """The error bound of each SLO statistic of TTFT and ITL, in ms."""
    stats: dict[str, float | None] = {
        key: error_bound_ms(health, p, key) for key, p in BOUND_STATS.items()
    }
    stats["max"] = error_bound_ms(health, None, "max")
    stats["mean"] = error_bound_ms(health, None, "mean")
    rounded = {key: None if v is None else round(v, 3) for key, v in stats.items()}
    return {metric: dict(rounded) for metric in BOUNDED_METRICS}


def process_block(health: ProcessHealth) -> dict[str, Any]:
    cpu_share = health.cpu_s / health.wall_s if health.wall_s > 0 else None
    return {
        "pid": health.pid,
        "loop_stall_ms": stall_block(health),
        "loop_held_ms": held_block(health),
        "error_bound_ms": bounds_block(health),
        "gc": gc_block(health),
        "cpu_s": round(health.cpu_s, 3),
        "cpu_share": None if cpu_share is None else round(cpu_share, 4),
    }


def generator_block(meta: Mapping[str, Any]) -> dict[str, Any]:
    """summary.json's readable view of the generator's self-measurement: merged
    over the processes (``loop_stall_ms``, ``error_bound_ms``, ``gc``) and per
    process (``per_process``); empty when the run did not measure it."""
    per_process = processes(meta)
    total = merged(per_process)
    if total is None:
        return {}
    return {
        "loop_stall_ms": stall_block(total),
        "loop_held_ms": held_block(total),
        "error_bound_ms": bounds_block(total),
        "gc": gc_block(total),
        "per_process": {name: process_block(h) for name, h in per_process.items()},
    }
