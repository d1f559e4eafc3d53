"""A run's progress while it runs: one panel redrawn in place on a terminal,
one compact line per interval in a CI log.

It renders a :class:`Progress`, numbers the load side has already computed
(the live SLO verdicts come from the final judge's rules, so the panel and the
verdict never disagree on a rule), and computes nothing of its own. The panel
is drawn with rich; the line is plain text at most :data:`LINE_WIDTH` columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slogate.analysis.verdict.slo import FRACTION_METRICS, SloResult

LINE_WIDTH = 120
# rich colour per live verdict; "ok so far" is a pass that more samples could still undo
COLOURS = {"pass": "green", "fail": "red", "inconclusive": "yellow", "invalid": "magenta"}


@dataclass(frozen=True, slots=True)
class SloNow:
    """One gated SLO judged on the numbers so far; ``value`` and ``limit`` in ``unit``."""

    scenario: str
    name: str  # e.g. "ttft_ms p99"
    value: float | None
    limit: float
    at_most: bool  # the value must stay <= limit (latency), else >= (goodput)
    verdict: str  # pass, fail, inconclusive or invalid
    unit: str  # "ms", "%", "/s" or ""


def slo_now(result: SloResult) -> SloNow:
    """The live view's row of a live verdict, in the unit a person reads."""
    t = result.threshold
    scale = 100.0 if t.metric in FRACTION_METRICS else 1.0
    if t.metric.endswith("_ms"):
        unit = "ms"
    elif t.metric in FRACTION_METRICS:
        unit = "%"
    else:
        unit = "/s" if t.metric.endswith("_per_s") else ""
    value = None if result.value is None else result.value * scale
    return SloNow(result.scenario, f"{t.metric} {t.stat}", value, t.limit * scale,
                  t.kind == "max", result.verdict.value, unit)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Progress:
    elapsed_s: float
    planned_s: float
    users: int
    in_flight: float
    requests_per_s: float
    tokens_per_s: float
    requests: int
    errors: int
    slos: tuple[SloNow, ...]
    stall_p99_ms: float | None  # the generator's own loop stalls: its error bound
    stall_warning_ms: float
    blurred_pct: float | None  # chunks read together (their ITL gaps are 0): ITL is blurred
    held: float = 0  # open loop: arrivals due and not yet sent (the in-flight cap is full)


def amount(value: float | None, unit: str = "") -> str:
    """Three significant digits at most, thousands without decimals."""
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}" if unit in ("ms",) else f"{text}{unit}"


def slo_text(slo: SloNow) -> str:
    sign = "<=" if slo.at_most else ">="
    return f"{amount(slo.value, slo.unit)} {sign} {amount(slo.limit, slo.unit)}"


def generator_text(progress: Progress) -> str:
    stall = progress.stall_p99_ms
    if stall is None:
        return "not measured yet"
    state = "ok" if stall < progress.stall_warning_ms else "stalling"
    return f"{state}, loop stalls p99 {stall:.1f} ms"


SHORT = {"inconclusive": "inc", "invalid": "inv"}


def counts(progress: Progress) -> str:
    by_verdict: dict[str, int] = {}
    for slo in progress.slos:
        by_verdict[slo.verdict] = by_verdict.get(slo.verdict, 0) + 1
    return " ".join(f"{n} {SHORT.get(v, v)}" for v, n in sorted(by_verdict.items()))


def worst(progress: Progress) -> SloNow | None:
    """The SLO to name first: failing, else undecided, else the least headroom."""
    rank = {"fail": 0, "invalid": 1, "inconclusive": 2, "pass": 3}

    def headroom(slo: SloNow) -> float:
        if slo.value is None or slo.limit == 0:
            return float("inf")
        share = (slo.limit - slo.value) / slo.limit
        return share if slo.at_most else -share

    return min(progress.slos, key=lambda s: (rank.get(s.verdict, 4), headroom(s)), default=None)


def progress_line(progress: Progress) -> str:
    """One line for a log, at most :data:`LINE_WIDTH` columns: the worst SLO
    is shortened first, then dropped, then the line cut."""
    head = (
        f"[slogate] {progress.elapsed_s:4.0f}/{progress.planned_s:.0f}s"
        f" users {progress.users} inflight {progress.in_flight:.0f}"
        + (f" held {progress.held:.0f}" if progress.held else "")
        + f" | {amount(progress.requests_per_s)} req/s {amount(progress.tokens_per_s)} tok/s"
        f" err {progress.errors}"
    )
    tail = ""
    if progress.blurred_pct:
        tail += f" | ITL blurred {progress.blurred_pct:.1f}%"
    if progress.stall_p99_ms is not None and progress.stall_p99_ms >= progress.stall_warning_ms:
        tail += f" | generator stalls p99 {progress.stall_p99_ms:.1f} ms"
    slo = ""
    named = worst(progress)
    if named is not None:
        slo = f" | SLO {counts(progress)}: {named.name} {slo_text(named)}"
    room = LINE_WIDTH - len(head) - len(tail)
    if len(slo) > room:
        slo = slo[: room - 1] + "…" if room > 12 else ""
    line = head + slo + tail
    return line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 1] + "…"


def progress_panel(progress: Progress) -> Any:
    """The panel a terminal shows, redrawn in place (rich renderables)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=max(progress.planned_s, 1e-9), completed=progress.elapsed_s, width=40),
        f"{progress.elapsed_s:.0f} / {progress.planned_s:.0f} s",
    )
    load = Table.grid(padding=(0, 3))
    load.add_row(
        f"users [b]{progress.users}[/]",
        f"in flight [b]{progress.in_flight:.0f}[/]"
        + (f", held back [b]{progress.held:.0f}[/]" if progress.held else ""),
        f"[b]{amount(progress.requests_per_s)}[/] req/s",
        f"[b]{amount(progress.tokens_per_s)}[/] tok/s",
        f"errors [b]{progress.errors}[/] of {progress.requests}",
    )
    slos = Table(box=None, padding=(0, 2), show_edge=False)
    for header in ("scenario", "SLO", "now vs threshold", "so far"):
        slos.add_column(header, no_wrap=True)
    for slo in progress.slos:
        colour = COLOURS.get(slo.verdict, "white")
        shown = "ok so far" if slo.verdict == "pass" else slo.verdict
        slos.add_row(slo.scenario, slo.name, f"[{colour}]{slo_text(slo)}[/]", f"[{colour}]{shown}")
    if progress.blurred_pct:
        parts_blurred = f"[yellow]chunks read together {progress.blurred_pct:.1f}%: ITL blurred[/]"
    else:
        parts_blurred = ""
    healthy = progress.stall_p99_ms is None or progress.stall_p99_ms < progress.stall_warning_ms
    generator = f"generator: [{'green' if healthy else 'yellow'}]{generator_text(progress)}[/]"
    parts = [bar, load, slos if progress.slos else "no SLO declared", generator]
    if parts_blurred:
        parts.append(parts_blurred)
    return Panel(Group(*parts), title="slogate", title_align="left", expand=False)


class LiveView:
    """Where progress goes: on a terminal one panel redrawn in place at every
    :meth:`show`; elsewhere (a CI log, a file) one line each ``interval_s``.
    :meth:`close` leaves the last panel on screen, so what is printed next
    (the verdict table) is the last screen."""

    def __init__(self, stream: Any, interval_s: float) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self.next_line_at: float | None = None
        self.live: Any = None
        if stream.isatty():
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream, force_terminal=True)
            self.live = Live(console=console, auto_refresh=False, redirect_stdout=False,
                             redirect_stderr=False)  # fmt: skip
            self.live.start()

    def show(self, progress: Progress, now: float) -> None:
        if self.live is not None:
            self.live.update(progress_panel(progress), refresh=True)
            return
        if self.next_line_at is not None and now < self.next_line_at:
            return
        self.next_line_at = (self.next_line_at or now) + self.interval_s
        print(progress_line(progress), file=self.stream, flush=True)

    def close(self, progress: Progress) -> None:
        """The final state: the panel redrawn once more, or a last line."""
        if self.live is not None:
            self.live.update(progress_panel(progress), refresh=True)
            self.live.stop()
            self.live = None
        else:
            self.next_line_at = None
            self.show(progress, 0.0)
