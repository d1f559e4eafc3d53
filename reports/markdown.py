"""``summary.md``: the run as a CI job summary (GitHub, GitLab, a pull request comment).

Built from ``summary.json`` alone: the verdict and exit code, one row per SLO
with its value, threshold, margin and 95% confidence interval, the baseline's
regressions, and a link to the report. Text that came from a server or a
scenario file is escaped, so a ``|`` or a newline cannot break the table and
no HTML in it is rendered.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.analysis.documents.neutral import neutral_text
from slogate.reports.html import (
    DASH,
    context_fit,
    margin_text,
    metric_value,
    num,
    percent,
    signed_pct,
)
from slogate.scenarios.metrics import E2E, TTFT

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import (
        BaselineError,
        Comparison,
        ScenarioSummary,
        SloEntry,
        Summary,
    )

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
VERDICT_MARK = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "invalid": "⛔"}
_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md(text: object) -> str:
    """One line of Markdown-escaped text: special characters backslashed, newlines spaced."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def interval(slo: SloEntry) -> str:
    lower, upper = slo.ci
    if lower is None and upper is None:
        return DASH
    return f"[{metric_value(lower, slo.metric)}, {metric_value(upper, slo.metric)}]"


def slo_rows(summary: Summary) -> list[str]:
    rows = [
        "| scenario | SLO | value | threshold | margin | 95% CI | n | verdict |",
        "|---|---|--:|--:|--:|---|--:|---|",
    ]
    for name, block in summary.scenarios.items():
        for slo in block.slo:
            rows.append(
                f"| {md(name)} | {md(slo.metric)} {md(slo.stat)} "
                f"| {metric_value(slo.value, slo.metric)} "
                f"| {metric_value(slo.threshold, slo.metric)} "
                f"| {margin_text(slo.margin, slo.margin_pct, slo.metric)} "
                f"| {interval(slo)} | {slo.n or DASH} "
                f"| {VERDICT_MARK.get(slo.verdict, '')} {md(slo.verdict)} |"
            )
    return rows if len(rows) > 2 else ["No SLO declared."]


def regression_lines(baseline: Comparison | BaselineError) -> list[str]:
    from slogate.analysis.documents.contracts import BaselineError

    if isinstance(baseline, BaselineError):
        return [f"Baseline not compared: {md(baseline.error)}"]
    shown = [d for d in baseline.deltas if d.regression or d.cannot_tell]
    head = (
        f"Against baseline **{md(baseline.base_run or '?')}**: "
        f"{md(baseline.verdict)}, {baseline.regressions} regression(s), "
        f"{baseline.cannot_tell} rise(s) within the generators' error "
        f"(tolerance {100 * baseline.tolerance:g}%, gated "
        f"{md(', '.join(baseline.gated))}, confidence intervals must not overlap)."
    )
    lines = [head]
    if shown:
        lines += [
            "",
            "| scenario | metric | baseline | now | change | generator ± | status |",
            "|---|---|--:|--:|--:|--:|---|",
        ]
        for d in shown:
            base, new = (None if e is None else e.value for e in (d.base, d.new))
            lines.append(
                f"| {md(d.scenario)} | {md(d.metric)} {md(d.stat)} "
                f"| {metric_value(base, d.metric)} "
                f"| {metric_value(new, d.metric)} "
                f"| {signed_pct(d.change_pct)} "
                f"| {metric_value(d.generator_error_ms, d.metric)} "
                f"| {'regression' if d.regression else 'cannot tell'} |"
            )
    return lines


def cost_lines(summary: Summary) -> list[str]:
    """With ``--gpu-price-per-hour``: each scenario's price per million tokens of
    each kind (each charges the whole GPU-hour to that kind)."""
    lines = []
    for name, block in summary.scenarios.items():
        cost = block.cost
        if cost is not None:
            lines.append(
                f"- {md(name)} cost per 1M tokens at {cost.gpus} GPU x "
                f"{num(cost.gpu_price_per_hour)}/h: output {num(cost.per_million_output_tokens)}, "
                f"input {num(cost.per_million_input_tokens)}, "
                f"goodput {num(cost.per_million_goodput_tokens)}"
            )
    return ["", *lines] if lines else []


def class_lines(summary: Summary) -> list[str]:
    """Traffic classes: who paid for the contention (each class's verdict is in
    the SLO table above, under its name)."""
    lines = []
    for name, block in summary.scenarios.items():
        tc = block.traffic_class
        if tc is not None:
            share = "-" if tc.wait_share is None else f"{100 * tc.wait_share:.1f}%"
            priority = "" if tc.priority is None else f", priority {tc.priority}"
            lines.append(
                f"- class {md(name)}{md(priority)}: {share} of the wait for first tokens, "
                f"shed {tc.sheds.get('429', 0)} with 429 and {tc.sheds.get('503', 0)} with 503"
            )
    return ["", *lines] if lines else []


def slice_lines(summary: Summary) -> list[str]:
    """``--slice``: each scenario's verdict slice by slice, so a drift shows in CI."""
    lines = []
    for name, block in summary.scenarios.items():
        if block.slices:
            verdicts = ", ".join(
                f"{num(sl.start_s)}-{num(sl.end_s)} s {sl.verdict}" for sl in block.slices
            )
            lines.append(f"- {md(name)} by slice: {md(verdicts)}")
    return ["", *lines] if lines else []


def probe_lines(summary: Summary) -> list[str]:
    """``--probes``: what a new user waited under the load, apart from the scenarios."""
    probes = summary.probes
    if probes is None:
        return []
    r, ttft, e2e = probes.requests, probes.metrics[TTFT.key], probes.metrics[E2E.key]
    return [
        "",
        f"Probes (one token, {num(probes.rate_per_s)}/s beside the load): {r.total} sent, "
        f"{r.failed} failed; TTFT p50 {metric_value(ttft.p50, TTFT.key)}, p99 "
        f"{metric_value(ttft.p99, TTFT.key)}; E2E p99 {metric_value(e2e.p99, E2E.key)}.",
    ]


def engine_latency_lines(summary: Summary) -> list[str]:
    """The client's mean TTFT and ITL beside the engine's own, when it logs them."""
    latency = summary.engine_latency
    lines = []
    for label, x in (("TTFT", latency and latency.ttft_ms), ("ITL", latency and latency.itl_ms)):
        if x:
            lines.append(
                f"- {label} mean: client {num(x.client_mean)} ms "
                f"({num(x.client_count)}), engine {num(x.mean)} ms ({num(x.count)}), "
                f"client minus engine {num(x.client_minus_engine)} ms"
            )
    cache = latency and latency.prefix_cache
    if cache:
        lines.append(
            f"- prefix-cache hit rate (tokens): client {percent(cache.client_hit_rate)}, "
            f"engine {percent(cache.engine_hit_rate)}"
        )
    return ["", *lines] if lines else []


def scenario_lines(
    summary: Summary, lines_of: Callable[[str, ScenarioSummary], list[str]]
) -> list[str]:
    """Each scenario's lines (``lines_of``: none when it has nothing to say),
    after a blank line when any has some."""
    lines = [
        line for name, scenario in summary.scenarios.items() for line in lines_of(name, scenario)
    ]
    return ["", *lines] if lines else []


def speculation_lines(summary: Summary) -> list[str]:
    """Speculative decoding's acceptance: each scenario's from the replies,
    and the engine's from its counters, when either said."""
    lines = [
        f"- {md(name)}: speculative acceptance {percent(found.acceptance_rate)} "
        f"({num(found.accepted_tokens)} of {num(found.draft_tokens)} draft tokens, "
        "from the replies)"
        for name, scenario in summary.scenarios.items()
        if (found := scenario.speculation) is not None
    ]
    engine = summary.speculation
    if engine is not None:
        lines.append(
            f"- engine: speculative acceptance {percent(engine.acceptance_rate)}, "
            f"mean accepted length {num(engine.mean_accepted_length)} tokens per step"
        )
    return ["", *lines] if lines else []


def prefix_cache_lines(name: str, scenario: ScenarioSummary) -> list[str]:
    """A scenario's prefix-cache hit rate from the replies, when they said."""
    cache = scenario.prefix_cache
    if not cache:
        return []
    return [
        f"- {md(name)}: prefix-cache hit rate {percent(cache.hit_rate)} of prompt tokens, "
        f"{num(cache.hit_requests)} of {num(cache.requests)} requests hit; TTFT p50 "
        f"hit {num(cache.ttft_hit_ms.p50)} ms, miss {num(cache.ttft_miss_ms.p50)} ms"
    ]


def structured_lines(name: str, scenario: ScenarioSummary) -> list[str]:
    """A scenario's structured outputs: validity, the constrained split and
    the compile gap, and the first answer that broke its schema."""
    so = scenario.structured_output
    if not so:
        return []
    return [
        f"- {md(name)}: schema validity {percent(so.validity)} "
        f"({num(so.invalid)} of {num(so.constrained)} answers broke their schema); "
        f"TTFT p50 constrained {num(so.ttft_constrained_ms.p50)} ms, unconstrained "
        f"{num(so.ttft_unconstrained_ms.p50)} ms; compile gap {num(so.compile_gap_ms)} ms",
        *(f"  - {md(sample)}" for sample in so.invalid_samples[:1]),
    ]


def session_lines(summary: Summary) -> list[str]:
    """Each replayed agent tree scenario's session table: wall time, engine
    and tool time, requests and tokens per complete session, TTFT by context."""
    lines = []
    for name, scenario in summary.scenarios.items():
        s = scenario.sessions
        if s is None or s.wall_ms is None:
            continue
        lines += [
            "",
            f"Agent sessions of {md(name)}: {num(s.count)} ({num(s.answered)} complete, "
            f"{num(s.failed)} failed, {num(s.unfinished)} unfinished)",
            "",
            "| per session | n | p50 | p90 | p99 | max |",
            "|---|---|---|---|---|---|",
        ]
        rows = (
            ("wall time, ms", s.wall_ms),
            ("waiting on the engine, ms", s.engine_ms),
            ("waiting on tools, ms", s.tool_ms),
            ("requests", s.steps),
            ("tokens", s.tokens),
        )
        for label, d in rows:
            if d is not None:
                lines.append(
                    f"| {label} | {num(d.count)} | {num(d.p50)} | {num(d.p90)} | {num(d.p99)} "
                    f"| {num(d.max)} |"
                )
        for band, d in (s.ttft_by_context_ms or {}).items():
            lines.append(
                f"| TTFT, {band.replace('_', '-').replace('-up', '+')} tokens, ms | {num(d.count)} "
                f"| {num(d.p50)} | {num(d.p90)} | {num(d.p99)} | {num(d.max)} |"
            )
    return lines


def release_lines(summary: Summary) -> list[str]:
    """Whether the engine let go of the requests the client closed, when checked."""
    release = summary.server_release
    if release is None or release.released is None:
        return []
    if release.released:
        text = f"back at {num(release.running_after)} after {num(release.waited_s)} s"
    else:
        text = (
            f"NOT released: {num(release.running_after)} still running "
            f"after {num(release.waited_s)} s"
        )
    closed = release.cancelled + release.cancelled_at_stop
    return [
        "",
        f"- closed requests ({num(closed)}): the engine's running requests {text} "
        f"(before the run: {num(release.running_before)})",
    ]


def share_text(share: Mapping[str, float]) -> str:
    """ "explains 83% of the ttft_ms miss" for each measured share, largest first."""
    ranked = sorted(share.items(), key=lambda item: -item[1])
    return ", ".join(f"{100 * value:.0f}% of the {metric} miss" for metric, value in ranked)


def why_lines(summary: Summary) -> list[str]:
    """The diagnosis, ranked as summary.json holds it; a failed run whose
    findings explain none of its failed SLOs says so."""
    if summary.verdict != "fail" and not summary.diagnosis:
        return []
    lines = ["", "### Why"]
    if summary.verdict == "fail" and not any(f.explains for f in summary.diagnosis):
        lines.append("No explanation found in the run's data for its failed SLOs.")
    for f in summary.diagnosis:
        head = f"- **{md(f.cause)}**" + (f" ({md(f.scenario)})" if f.scenario else "")
        explains = f" Explains {md(', '.join(f.explains))}" if f.explains else ""
        share = f" \\({md(share_text(f.share))}\\)" if f.explains and f.share else ""
        lines.append(f"{head}: {md(f.text)}{explains}{share}")
        if f.engine_metrics:
            lines.append(f"  - engine metrics {md(f.engine_metrics)}: {md(f.engine_text)}")
        if f.action:
            lines.append(f"  - {md(f.action)}")
    return lines


def summary_markdown(summary: Summary | Mapping[str, Any], report_link: str) -> str:
    """The Markdown job summary of a run; ``report_link`` is where its report.html is."""
    from slogate.analysis.documents.contracts import Comparison, Summary, as_model

    summary = as_model(Summary, summary, "summary")
    verdict, run = summary.verdict, summary.run
    engine = run.engine or {}
    baseline = summary.baseline
    gate = baseline.verdict if isinstance(baseline, Comparison) else "no regression"
    mark = VERDICT_MARK.get(verdict)
    if verdict == "pass" and gate != "no regression":
        mark = VERDICT_MARK["fail" if gate == "regression" else "invalid"]
    headline = md(verdict.upper())
    if gate != "no regression":
        headline += f", {md(gate.upper())} against the baseline"
    title = f"## {mark or ''} slogate {md(run.run_id or '')}: {headline} (exit {summary.exit_code})"
    target = ", ".join(
        md(part) for part in (engine.get("model"), engine.get("owned_by"), run.host) if part
    )
    lines = [
        title,
        "",
        f"Target: {target or DASH}; revision {md(run.git_revision or DASH)}.",
    ]
    if context_fit(engine):
        lines.append(f"Context: {md(context_fit(engine))}.")
    saturation = run.saturation
    if saturation is not None and saturation.found is not None:
        lines += [
            "",
            f"**Past saturation** (--saturation {saturation.mode}): {md(saturation.found.reason)}.",
        ]
    if run.stopped_early is not None:
        stop = run.stopped_early
        lines += ["", f"Stopped early (--abort-on-fail) at {stop.at_s:.0f} s: {md(stop.reason)}."]
    if run.warmup_auto is not None:
        cut = run.warmup_auto
        lines += [
            "",
            f"Warm-up found (--warmup auto, MSER): {num(cut.cut_s)} s cut. {md(cut.note)}",
        ]
    lines += [f"- {md(reason)}" for reason in summary.invalid_reasons]
    lines += ["", *slo_rows(summary)]
    lines += scenario_lines(summary, prefix_cache_lines)
    lines += speculation_lines(summary)
    lines += scenario_lines(summary, structured_lines)
    lines += session_lines(summary)
    lines += why_lines(summary)
    lines += engine_latency_lines(summary)
    lines += class_lines(summary)
    lines += slice_lines(summary)
    lines += probe_lines(summary)
    lines += release_lines(summary)
    lines += cost_lines(summary)
    if summary.energy is not None:
        e = summary.energy
        lines += [
            "",
            f"Energy: {num(e.per_output_token_j)} J per output token, {num(e.per_request_j)} J "
            f"per request ({num(e.mean_power_w)} W mean, from {md(e.source)}).",
        ]
    if summary.baseline:
        lines += ["", *regression_lines(summary.baseline)]
    lines += ["", f"[Full report]({report_link.replace(' ', '%20').replace(')', '%29')})", ""]
    return neutral_text("\n".join(lines))


def append_step_summary(markdown: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Append ``markdown`` to the file GitHub Actions names in ``$GITHUB_STEP_SUMMARY``
    (that file collects every step's summary, so it is appended to, never replaced)."""
    target = environ.get(STEP_SUMMARY_ENV)
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown + "\n")
    return path
