"""The run as the process that judges it sees it: the local runner, or the master.

It judges from its process's own recorder: a local run's users record straight
into it (no encoding round trip on the load loop), a master absorbs the
workers' payloads into it. It closes time windows into rows, samples load
gauges, prints the headless status line, and at the end hands everything to
``reports`` as a :class:`RunData`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.analysis.diagnosis.diagnose import blurred_share
from slogate.analysis.diagnosis.release import (
    RELEASE_POLL_S,
    RELEASE_WAIT_S,
    release_outcome,
    released,
)
from slogate.analysis.documents.journal import JOURNAL_FILE, JournalWriter
from slogate.analysis.documents.rundata import DATA_DIR, RunData, forget_final_save
from slogate.analysis.documents.summary import redact
from slogate.analysis.measurement.costs import Pricing
from slogate.analysis.measurement.recorder import OVERALL, Bucket, Recorder
from slogate.analysis.measurement.timeseries import apart_row, window_row
from slogate.analysis.measurement.warmup import METHOD, WarmupCut, find_cut
from slogate.analysis.verdict.early_stop import EarlyStop, early_stop
from slogate.analysis.verdict.generator import ProcessHealth, error_bound_ms, merged
from slogate.analysis.verdict.judge import judge_live, preload_statistics
from slogate.analysis.verdict.saturation import Saturation
from slogate.analysis.verdict.saturation import detect as detect_saturation
from slogate.analysis.verdict.slo import SloResult, Verdict
from slogate.client.engine_info import EngineInfo
from slogate.client.served_by import MAX_NAME_CHARS
from slogate.locustfiles.context import LoadContext
from slogate.locustfiles.context_count import ContextCount
from slogate.locustfiles.provenance import git_revision, tool_version
from slogate.locustfiles.worker_clocks import wall
from slogate.reports.progress import Progress, SloNow, slo_now
from slogate.scenarios.context_fit import Overflow
from slogate.scenarios.model import Scenario, TrafficClass

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricsData

    from slogate.locustfiles.otlp_export import MetricsPush
    from slogate.locustfiles.scraper import MetricsScraper
    from slogate.reports import Outcome

log = logging.getLogger("slogate")

# A window stays open this many report intervals after it ends, so workers'
# reports that straddle its end still land in it.
WINDOW_GRACE_S = 7.0
# The status line names the generator's own error bound from this much on.
STALL_WARNING_MS = 1.0


def scenario_meta(scenario: Scenario) -> dict[str, Any]:
    return {
        "source": scenario.source,
        "api": scenario.api,
        "model": scenario.model,
        "raw": scenario.raw,
        "load": asdict(scenario.load),
        "slo": [asdict(t) for t in scenario.slo.thresholds],
        "goodput": asdict(scenario.slo.goodput) if scenario.slo.goodput else None,
        "weight": scenario.weight,
        "class": class_meta(scenario.traffic_class),
    }


def class_meta(traffic_class: TrafficClass | None) -> dict[str, Any] | None:
    """What a traffic class sent, for the summary: its SLOs are the scenario's."""
    if traffic_class is None:
        return None
    return {
        "priority": traffic_class.priority,
        "body": traffic_class.body,
        "headers": dict(traffic_class.headers),
    }


class RunSession:
    def __init__(
        self,
        ctx: LoadContext,
        engine: EngineInfo,
        out_dir: Path,
        host: str,
        command: str,
        max_lag_ms: float,
        processes_reason: str = "",
        context_fits: Sequence[Overflow] = (),
        context_count: ContextCount | None = None,
        baseline: tuple[str, RunData] | None = None,
        pricing: Pricing | None = None,
        push_url: str | None = None,
        allow_uncertain: bool = False,
        abort_min_window_s: float | None = None,
        saturation: str = "off",
        slice_s: float = 0.0,
        probes_per_s: float = 0.0,
        otlp: MetricsPush | None = None,
    ) -> None:
        """``baseline``: the folder of a run to compare with, and its data (read
        before the run, so a bad folder stops it before any load);
        ``allow_uncertain``: a gated rise within the generators' error passes
        the gate instead of exiting 3; ``abort_min_window_s``: with
        ``--abort-on-fail``, the measured time before a settled failure stops
        the run (None: never stopped early); ``saturation``: off, monitor
        (the verdict says so) or stop (the run ends, exit 3); ``slice_s``: the
        length of ``--slice``'s slices (0: none); ``probes_per_s``: ``--probes``'s
        rate (0: none); ``push_url``:
        a Prometheus Pushgateway that receives the run's metrics at the end;
        ``otlp``: an OpenTelemetry collector that receives them as the run goes
        and at the end."""
        self.ctx = ctx
        self.engine = engine
        self.out_dir = out_dir
        self.host = host
        self.command = command
        self.max_lag_ms = max_lag_ms
        self.processes_reason = processes_reason
        self.context_fits = list(context_fits)
        self.context_count = context_count
        self.baseline = baseline
        self.pricing = pricing
        self.push_url = push_url
        self.otlp = otlp
        self.allow_uncertain = allow_uncertain
        self.abort_min_window_s = abort_min_window_s
        self.stopped_early: EarlyStop | None = None
        self.saturation_mode = saturation
        self.saturated: Saturation | None = None
        self.rows_checked = 0
        self.slice_s = slice_s
        self.probes_per_s = probes_per_s
        self.auto_cut: WarmupCut | None = None  # --warmup auto, once the load ended
        self.collector: Recorder = ctx.recorder
        self.rows: list[dict[str, Any]] = []
        self.apart_rows: list[dict[str, Any]] = []  # by endpoint and replica
        self.worker_gauges: dict[str, dict[str, Any]] = {}
        self.worker_health: dict[str, dict[str, Any]] = {}
        self.finals: set[str] = set()
        self.missing_finals: list[str] = []
        self.workers_seen: set[str] = set()
        self.worker_last_s: dict[str, float] = {}
        self.workers: dict[str, dict[str, Any]] = {}
        self.cpu_warning = False
        self.users = 0
        self.started_at: str | None = None
        self.start_wall: float | None = None
        self.scraper: MetricsScraper | None = None
        self.finished_code: int | None = None
        self.verdict_table: str | None = None
        self.selftest: dict[str, Any] | None = None
        self.journal: JournalWriter | None = None
        self.release: dict[str, Any] | None = None
        preload_statistics()

    def start(self, origin_s: float) -> None:
        self.collector.origin_s = origin_s
        self.start_wall = origin_s
        self.started_at = datetime.fromtimestamp(origin_s, timezone.utc).isoformat()
        try:
            forget_final_save(self.out_dir)
            self.journal = JournalWriter(
                self.out_dir / DATA_DIR / JOURNAL_FILE, self.meta(False, None), clean=redact
            )
        except OSError as error:
            log.warning("slogate: no journal (a kill would leave no data): %s", error)

    def absorb(self, payload: dict[str, Any], worker: str) -> None:
        """A worker's report: its recorder's content since the last, its gauges
        and its own health so far (the latest is kept); a worker whose load
        failed ends the run."""
        self.collector.absorb(payload["recorder"])
        self.cpu_warning |= payload["gauges"]["cpu_warning"]
        self.workers_seen.add(worker)
        self.worker_last_s[worker] = wall()
        self.worker_gauges[worker] = payload["gauges"]
        failure = payload["gauges"].get("failure")
        if failure:  # a worker's load cannot go on (its engine's /tokenize failed)
            self.ctx.fail(f"worker {worker}: {failure}")
        if payload.get("generator") is not None:
            self.worker_health[worker] = payload["generator"]

    def generator_health(self) -> ProcessHealth | None:
        """All load processes' self-measurement so far, merged (None before any)."""
        if self.worker_health:
            return merged({w: ProcessHealth.from_dict(h) for w, h in self.worker_health.items()})
        own = self.ctx.watch.health()
        return own if own.measured else None

    def health(self) -> dict[str, dict[str, Any]]:
        """Each load process's self-measurement: the workers', else this process's."""
        if self.worker_health:
            return dict(self.worker_health)
        own = self.ctx.watch.health()
        return {"local": own.to_dict()} if own.measured else {}

    def gauges(self) -> dict[str, float]:
        """Users, requests in flight and, open loop, the arrivals due and not yet
        sent (``backlog``: held back by the in-flight cap) and the longest wait
        among them so far (``backlog_wait_ms``), in every process."""
        if not self.worker_gauges:
            return {"users": self.users, "in_flight": self.ctx.in_flight, **self.ctx.backlog()}
        workers = self.worker_gauges.values()
        return {
            "users": self.users,
            "in_flight": sum(g["in_flight"] for g in workers),
            "backlog": sum(g["backlog"] for g in workers),
            "backlog_wait_ms": max(g["backlog_wait_ms"] for g in workers),
        }

    def cancelled(self) -> int:
        """Requests cut off by the end of the run, in every process."""
        if self.worker_gauges:
            return sum(g["cancelled"] for g in self.worker_gauges.values())
        return self.ctx.cancelled

    def check_release(self) -> dict[str, Any] | None:
        """After the load, when the client closed requests (cancelled, or cut
        off at the stop): wait, bounded, for the engine's running-requests
        gauge to come back to its level before the run (None: nothing closed,
        or no metrics scraped)."""
        planned = sum(
            bucket.counters.cancelled
            for (_, span), bucket in self.collector.buckets.items()
            if span == OVERALL
        )
        at_stop = self.cancelled()
        if self.scraper is None or planned + at_stop == 0:
            return None
        before = self.scraper.engine_series("running")
        readings = []
        if before:
            readings = self.scraper.poll_until(
                "running", lambda r: released(before[0], r), RELEASE_WAIT_S, RELEASE_POLL_S
            )
        outcome = release_outcome(
            before[0] if before else None, readings, RELEASE_WAIT_S, planned, at_stop
        )
        if outcome["released"] is False:
            log.warning(
                "slogate: the engine still ran %g requests %g s after the load (%g before it)",
                outcome["running_after"],
                outcome["waited_s"],
                outcome["running_before"],
            )
        return outcome

    def close_windows(self, everything: bool = False) -> None:
        if self.collector.origin_s is None:
            return
        now_index = (time.time() - self.collector.origin_s - WINDOW_GRACE_S) // self.ctx.window_s
        before = 1 << 62 if everything else int(now_index)
        gauges = self.gauges()
        for (scenario, index), bucket in sorted(self.collector.pop_windows(before).items()):
            self.rows.append(window_row(scenario, index, self.ctx.window_s, bucket, gauges))
            if self.slice_s:
                k = int(index * self.ctx.window_s // self.slice_s)
                self.collector.bucket(scenario, f"slice:{k}").add(bucket)
        for (scenario, span, index), bucket in sorted(
            self.collector.pop_apart_windows(before).items()
        ):
            self.apart_rows.append(apart_row(scenario, span, index, self.ctx.window_s, bucket))

    def progress(self) -> Progress:
        """The numbers the live view shows (:mod:`slogate.reports.progress`),
        over the measured window so far (warm-up excluded)."""
        elapsed = self.ctx.elapsed_s()
        span = max(elapsed - self.ctx.timeline.warmup_s, 1e-9)
        requests = errors = tokens = 0
        blurred: list[float] = []
        slos: list[SloNow] = []
        for scenario in self.ctx.scenarios:
            bucket = self.collector.buckets.get((scenario.name, OVERALL))
            if bucket is not None:
                c = bucket.counters
                requests, errors, tokens = (
                    requests + c.total,
                    errors + c.failed,
                    tokens + c.output_tokens,
                )
                share = blurred_share(c)
                if share is not None:
                    blurred.append(100.0 * share)
            slos += [slo_now(result) for result in self.live_slo(scenario)[0]]
        health = self.generator_health()
        gauges = self.gauges()
        return Progress(
            elapsed_s=elapsed,
            planned_s=self.ctx.timeline.total_s,
            users=self.users,
            in_flight=gauges["in_flight"],
            held=gauges["backlog"],
            requests_per_s=requests / span,
            tokens_per_s=tokens / span,
            requests=requests,
            errors=errors,
            slos=tuple(slos),
            stall_p99_ms=None if health is None else error_bound_ms(health, 99.0, "p99"),
            stall_warning_ms=STALL_WARNING_MS,
            blurred_pct=max(blurred, default=None),
        )

    def otlp_metrics(self, summary: dict[str, Any] | None = None) -> MetricsData:
        """``--otlp-endpoint``'s data: each scenario's measured bucket so far,
        its throughput over the measured time, and once judged (``summary``)
        the summary's own throughput and verdicts."""
        from slogate.reports.otlp import Rates

        assert self.otlp is not None
        buckets = {
            s.name: self.collector.buckets.get((s.name, OVERALL)) or Bucket()
            for s in self.ctx.scenarios
        }
        if summary is not None:
            scenarios = summary["scenarios"]
            rates = {
                name: Rates(
                    s["throughput"]["requests_per_s"], s["throughput"]["output_tokens_per_s"]
                )
                for name, s in scenarios.items()
            }
            verdicts = {"": summary["verdict"]} | {n: s["verdict"] for n, s in scenarios.items()}
            return self.otlp.metrics(buckets, rates, self.start_wall or 0.0, verdicts)
        span = max(self.ctx.elapsed_s() - self.ctx.timeline.warmup_s, 0.0)
        rates = {
            name: Rates(
                b.counters.ok / span if span else None,
                b.counters.output_tokens / span if span else None,
            )
            for name, b in buckets.items()
        }
        return self.otlp.metrics(buckets, rates, self.start_wall or 0.0)

    def live_slo(self, scenario: Scenario) -> tuple[list[SloResult], Verdict]:
        """The scenario's SLOs judged on the numbers so far (the final judge's rules)."""
        measured = max(self.ctx.elapsed_s() - self.ctx.timeline.warmup_s, 0.0)
        bucket = self.collector.buckets.get((scenario.name, OVERALL))
        return judge_live(
            scenario.name, scenario_meta(scenario), bucket, measured, self.generator_health()
        )

    def check_early_stop(self) -> EarlyStop | None:
        """With ``--abort-on-fail``: stop the load once an SLO has failed for
        good (``slogate.analysis.verdict.early_stop``); everything measured is kept."""
        if self.abort_min_window_s is None or self.stopped_early is not None:
            return None
        elapsed = self.ctx.elapsed_s()
        measured = max(elapsed - self.ctx.timeline.warmup_s, 0.0)
        results = [r for scenario in self.ctx.scenarios for r in self.live_slo(scenario)[0]]
        stop = early_stop(results, elapsed, measured, self.abort_min_window_s)
        if stop is not None:
            self.stopped_early = stop
            self.ctx.stop_early = True
            log.warning("slogate: --abort-on-fail: stopping at %.0f s: %s", elapsed, stop.reason)
        return stop

    def check_saturation(self) -> Saturation | None:
        """Whether a scenario's queue and TTFT are growing without bound
        (``slogate.analysis.verdict.saturation``), found once; with ``stop`` the load ends."""
        if self.saturation_mode == "off" or self.saturated is not None:
            return self.saturated
        if len(self.rows) == self.rows_checked:
            return None  # no window closed since the last look
        self.rows_checked = len(self.rows)
        timeline = self.ctx.timeline
        phase = timeline.phase_at(self.ctx.elapsed_s())
        rate = phase.rate if phase is not None else None
        for scenario in self.ctx.scenarios:
            offered = None if rate is None else rate.rps * scenario.weight
            found = detect_saturation(
                scenario.name, self.rows, since_s=timeline.warmup_s, offered_per_s=offered
            )
            if found is not None:
                self.saturated = found
                log.warning("slogate: %s", found.reason)
                if self.saturation_mode == "stop":
                    log.warning("slogate: --saturation stop: ending the run")
                    self.ctx.stop_early = True
                break
        return self.saturated

    def saturation_meta(self) -> dict[str, Any] | None:
        if self.saturation_mode == "off":
            return None
        return {
            "mode": self.saturation_mode,
            "found": self.saturated.to_dict() if self.saturated else None,
            "stopped": self.saturated is not None and self.saturation_mode == "stop",
        }

    def cut_warmup(self) -> None:
        """``--warmup auto``: find where TTFT and ITL settled in the closed
        windows (``slogate.analysis.measurement.warmup``) and let the run's measured
        buckets start there."""
        timeline = self.ctx.timeline
        if not timeline.head_s:
            return
        names = [s.name for s in self.ctx.scenarios]
        self.auto_cut = find_cut(self.rows, names, timeline.segment_s, timeline.total_s)
        cut_s = self.auto_cut.cut_s
        self.collector.apply_cut(round(cut_s / timeline.segment_s), cut_s)
        log.info("slogate: --warmup auto: %.1f s cut (%s)", self.auto_cut.cut_s, METHOD)

    def meta(self, complete: bool, reason: str | None) -> dict[str, Any]:
        ended = time.time()
        timeline = self.ctx.timeline
        warmup = self.auto_cut.cut_s if self.auto_cut else timeline.warmup_s
        measured = max(timeline.total_s - warmup, 0.0)
        if self.start_wall is not None:
            measured = min(measured, max(ended - self.start_wall - warmup, 0))
        return {
            "run_id": self.out_dir.name,
            "started_at": self.started_at,
            "ended_at": datetime.fromtimestamp(ended, timezone.utc).isoformat(),
            "measured_s": measured,
            "warmup_s": warmup,
            "warmup_auto": self.auto_cut.to_dict() if self.auto_cut else None,
            "complete": complete,
            "incomplete_reason": reason,
            "host": self.host,
            "engine": self.engine_meta(),
            "tool_version": tool_version(),
            "git_revision": git_revision(),
            "command": self.command,
            "window_s": self.ctx.window_s,
            "slice_s": self.slice_s or None,
            "probes_per_s": self.probes_per_s or None,
            "scenarios": {s.name: scenario_meta(s) for s in self.ctx.scenarios},
            "stages": [asdict(p) for p in self.ctx.timeline.phases],
            "cancelled_at_stop": self.cancelled(),
            "trace_id": self.ctx.identity.trace_id,
            "server_release": self.release,
            "generator": {
                "max_lag_ms": self.max_lag_ms,
                "cpu_warning": self.cpu_warning,
                "processes": max(len(self.workers_seen), 1),
                "processes_reason": self.processes_reason,
                "workers": self.workers,
                "selftest": self.selftest,
                "health": self.health(),
            },
            "baseline": self.baseline[0] if self.baseline else None,
            "allow_uncertain": self.allow_uncertain,
            "stopped_early": asdict(self.stopped_early) if self.stopped_early else None,
            "saturation": self.saturation_meta(),
            "pricing": asdict(self.pricing) if self.pricing else None,
            "pid": os.getpid(),
        }

    def engine_meta(self) -> dict[str, Any]:
        """The engine as it announced itself, and what the run did with the
        planned requests longer than its context (``--fit-context``). Its names
        are cut as a replica's are: a 1 MB model id, a label of every metric,
        made metrics.prom 51 MB (the requests still name the model whole)."""
        meta: dict[str, Any] = {
            "owned_by": self.engine.owned_by[:MAX_NAME_CHARS],
            "model": self.engine.model[:MAX_NAME_CHARS],
        }
        fit = self.ctx.fit
        if fit is not None:
            meta["context"] = fit.context
        if self.context_count is not None:
            meta["context_count"] = self.context_count.to_dict()
        if fit is not None and self.context_fits:
            meta["fit_context"] = {
                "mode": fit.mode,
                "scenarios": [o.to_dict() for o in self.context_fits],
            }
        return meta

    def flush_journal(self, pause: Callable[[], object] | None = None) -> None:
        """Append the data since the last flush to the journal: a process killed
        from here on (SIGKILL, out of memory) leaves a folder that ``slogate
        report`` judges, incomplete (exit 3). ``pause`` yields to the event
        loop between histograms (``JournalWriter.flush``)."""
        if self.journal is None:
            return
        try:
            self.journal.flush(
                self.collector.buckets, self.rows, self.meta(False, None), pause, self.apart_rows
            )
        except OSError as error:  # the journal closes itself: warned once
            log.warning("slogate: journal not written, none from now on: %s", error)

    def close_journal(self, meta: dict[str, Any]) -> None:
        """The last flush, with the final metadata (before masking: the journal
        masks what changed), and the complete frame."""
        if self.journal is None:
            return
        try:
            self.journal.flush(self.collector.buckets, self.rows, meta, apart=self.apart_rows)
            self.journal.complete()
        except OSError as error:
            log.warning("slogate: journal not closed: %s", error)
        self.journal = None

    def publish(self, outcome: Outcome) -> None:
        """Tell CI and the team's dashboards: the regression verdict against the
        baseline, the job summary, the Pushgateway. A push that fails is logged and
        does not change the verdict (the results folder holds the same numbers)."""
        from slogate.reports import comparison_text
        from slogate.reports.markdown import append_step_summary
        from slogate.reports.openmetrics import push_metrics

        if outcome.comparison is not None and self.baseline is not None:
            text = comparison_text(outcome.comparison)
            log.info(
                "slogate: against baseline %s (exit 1 on a regression, 3 when it cannot tell)\n%s",
                self.baseline[0],
                text,
            )
        step = append_step_summary(outcome.files["markdown"].read_text(encoding="utf-8"))
        if step is not None:
            log.info("slogate: job summary appended to %s", step)
        if self.push_url:
            try:
                push_metrics(outcome.summary, self.push_url)
                log.info("slogate: metrics pushed to %s", self.push_url)
            except OSError as error:
                log.error("slogate: %s", error)
        if self.otlp is not None:
            self.otlp.last(self.otlp_metrics(outcome.summary))

    def finish(self, complete: bool, reason: str | None = None) -> int:
        """Write the results folder and return the gate's exit code (once); the
        verdict table is kept for the very end of the output."""
        if self.finished_code is not None:
            return self.finished_code
        from slogate.reports import write_index, write_results
        from slogate.reports.terminal import verdict_table

        self.close_windows(everything=True)
        self.cut_warmup()
        self.release = self.check_release()
        samples = self.scraper.stop() if self.scraper is not None else []
        meta = self.meta(complete, reason)
        run = RunData(
            meta=redact(meta),
            buckets=self.collector.buckets,
            timeseries=self.rows,
            timeseries_apart=self.apart_rows,
            server_metrics=samples,
            timelines=self.collector.timelines,
        )
        self.close_journal(meta)
        run.save(self.out_dir)
        baseline = self.baseline[1] if self.baseline else None
        outcome = write_results(self.out_dir, run, baseline)
        try:
            if write_index(self.out_dir.parent) is None:
                log.warning(
                    "slogate: %s is not a slogate index: left as it is",
                    self.out_dir.parent / "index.html",
                )
        except OSError as error:  # the run's own results are written: only the list failed
            log.warning("slogate: cannot write the runs index: %s", error)
        self.publish(outcome)
        self.verdict_table = verdict_table(outcome.summary, outcome.files["report"])
        self.finished_code = outcome.exit_code
        return outcome.exit_code
