"""Why an SLO failed: the standard troubleshooting paths, run on a run's data.

Each path looks for one cause and makes a claim only when the recorded numbers
show it, quoting them; a path without its evidence says nothing. The paths:

- **load generator**: the tool lagged behind its arrival schedule or ran out of
  CPU, and every latency is then suspect (checked first, it voids the rest); or
  many output chunks were timed by one read, which blurs the inter-token gaps
  (a warning, which says how many were read while the generator's loop was
  stalled: those are its own, the others the engine's batching);
- **admission limits**: requests refused (HTTP 429, 5xx) or cut off (timeouts);
- **capacity-bound**: requests waiting in the engine's queue, or an open-loop
  rate the server could not keep up with;
- **KV cache full**: the engine's KV usage near full, or preemptions;
- **prefill-bound**: TTFT rising with input length (per input-length band, or
  with a conversation's turn index as its history grows);
- **attention / KV reads**: TPOT rising with context length;
- the requests' timelines (``slogate.analysis.diagnosis.causes``): prefill interference,
  prefill-bound TTFT against queueing, a concurrency ceiling, decode-bound
  ITL, preemption signs, saturation and cache effects, each with the share of
  a failed SLO's miss it explains (they replace the input-length bands'
  prefill path where the run kept timelines).

Each finding then gets the engine's metrics' answer (``confirmation``) and the
engine setting to try (``remedies``); findings that explain a failed SLO come
first, by the share of the miss they explain.

Length bands come from histograms named ``ttft_in_<N>`` and ``tpot_ctx_<N>``
(``slogate.analysis.measurement.bands``): TTFT of requests with N..2N-1 input tokens, TPOT of
requests with N..2N-1 tokens of context (input plus output).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slogate.analysis.diagnosis.causes import (
    LATENCY_SLOS,
    MIN_SHARE,
    WAIT_METRICS,
    member_findings,
    timeline_findings,
)
from slogate.analysis.diagnosis.confirmation import (
    DISAGREE,
    KV_NEAR_FULL,
    MIN_QUEUED_SCRAPES,
    confirm,
    series,
)
from slogate.analysis.diagnosis.findings import Finding
from slogate.analysis.diagnosis.remedies import action, engine_family, remedies
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.bands import TPOT_BY_CONTEXT, TTFT_BY_INPUT, band_label
from slogate.analysis.measurement.recorder import Bucket, Counters
from slogate.analysis.measurement.timelines import Timelines
from slogate.analysis.verdict.lag_causes import cause_p99_ms, cause_text, held_by_cap
from slogate.analysis.verdict.slo import (
    SAME_READ_SHARE,
    RunVerdict,
    SloResult,
    Verdict,
    evaluate_run,
    lag_p99_ms,
    point_verdict,
)
from slogate.scenarios.metrics import DECODE, E2E, GOODPUT, ITL, TPOT, WAIT, keys_of

US_PER_MS = 1000.0
# A queue claim needs a queue seen in two scrapes (MIN_QUEUED_SCRAPES) or two
# requests deep: one request waiting in one scrape is a moment, not a state.
MIN_QUEUE_DEPTH = 2
KEEP_UP_FRACTION = 0.9
MIN_GROUPS = 3
MIN_GROUP_SAMPLES = 5
MIN_RANK_CORRELATION = 0.8
TTFT_MIN_GROWTH = 1.5
TPOT_MIN_GROWTH = 1.2
# Chunks read together leave a 0 gap and a doubled one beside it: at 1% of the
# gaps (SAME_READ_SHARE) ITL's p99 is no longer the engine's alone.
SAME_READ_MIN_GAPS = 200

ADMISSION_ERRORS = {
    "http_429": "refused with HTTP 429 (the server's admission or rate limit)",
    "http_5xx": "answered with HTTP 5xx (overload or a server fault; Ollama sends 503 "
    "when its queue is full)",
    "timeout_first_token": "timed out waiting for their first token (queued too long)",
    "timeout_connect": "timed out connecting (the server's accept queue was full)",
    "connect": "could not connect",
    "timeout_stall": "stalled mid-stream past the stall timeout",
}
KV_FULL = "KV cache full"
# What a full KV cache makes the client see: the share of a miss these explain
# is the KV cache's too.
KV_SYMPTOMS = ("queueing", "saturation", "concurrency ceiling", "preemption")
QUEUE_METRICS = (*keys_of(WAIT), GOODPUT)
DECODE_METRICS = (*keys_of(DECODE), GOODPUT)


# -- the paths ----------------------------------------------------------------------
def generator_findings(run: RunData) -> list[Finding]:
    generator = run.meta.get("generator") or {}
    findings = []
    lag, bound = lag_p99_ms(run), generator.get("max_lag_ms")
    if lag is not None and bound is not None and lag > bound:
        causes = cause_p99_ms(run)
        evidence = {"lag_p99_ms": lag, "max_lag_ms": bound, "lag_cause_p99_ms": causes}
        if held_by_cap(causes):
            text = (
                f"Requests were sent {lag:.1f} ms after their scheduled time at p99, over the "
                f"{bound:g} ms bound, {cause_text(causes)}: every slot under the in-flight cap "
                "was taken because the engine finished fewer requests than arrived. The "
                "generator was not late; the queue grew in the schedule. Latencies from the "
                "schedule describe that queue: lower the rate, or find the engine's capacity."
            )
            findings.append(Finding("saturation", text, evidence, ("*",)))
        else:
            findings.append(
                Finding(
                    "load generator",
                    f"The load generator itself lagged: requests were sent {lag:.1f} ms after "
                    f"their scheduled time at p99, over the {bound:g} ms bound"
                    + (f", {cause_text(causes)}" if causes else "")
                    + ". Latencies measured from the actual start understate queueing; fix the "
                    "generator (more --processes, a lower rate) before reading the verdicts.",
                    evidence,
                    ("*",),
                )
            )
    if generator.get("cpu_warning"):
        findings.append(
            Finding(
                "load generator",
                "The load generator's CPU was saturated (over 90%): its timestamps are late, "
                "so every latency is suspect.",
                {"cpu_warning": True},
                ("*",),
            )
        )
    return findings


def blurred_share(c: Counters) -> float | None:
    """The share of 0 gaps between output chunks when it is enough to blur ITL's
    tail (over ``SAME_READ_SHARE`` of at least ``SAME_READ_MIN_GAPS``), else None."""
    if c.chunk_gaps < SAME_READ_MIN_GAPS or c.same_read_gaps <= SAME_READ_SHARE * c.chunk_gaps:
        return None
    return c.same_read_gaps / c.chunk_gaps


def same_read_cause(c: Counters) -> str:
    """Whose the 0 gaps are: those read while the generator's loop was stalled are
    its own (they make ITL SLOs invalid), the others the engine's batching."""
    stalled = c.same_read_stalled_gaps
    if not stalled:
        return (
            "The generator's loop was prompt when it read them: the engine sent those "
            "events together (a stream interval, speculative decoding, a batched flush)."
        )
    return (
        f"{stalled} of them were read while the load generator's loop was stalled: those "
        "are its own (too many streams for its CPU, or the machine was busy: compare "
        "`slogate selftest`, add --processes); the other "
        f"{c.same_read_gaps - stalled} were read promptly, so the engine sent them together."
    )


def same_read_findings(scenario: str, bucket: Bucket) -> list[Finding]:
    c = bucket.counters
    share = blurred_share(c)
    if share is None:
        return []
    return [
        Finding(
            "load generator",
            f"{100 * share:.1f}% of the gaps between output chunks ({c.same_read_gaps} of "
            f"{c.chunk_gaps}) were 0: those chunks arrived in one read and share its instant, "
            "so their true gaps are unknown and ITL percentiles below that share read 0. "
            + same_read_cause(c),
            {
                "same_read_gaps": c.same_read_gaps,
                "chunk_gaps": c.chunk_gaps,
                "share": share,
                "stalled_gaps": c.same_read_stalled_gaps,
            },
            (ITL.key,),
            scenario,
        )
    ]


def admission_findings(scenario: str, bucket: Bucket) -> list[Finding]:
    c = bucket.counters
    if not c.total:
        return []
    findings = []
    for kind, meaning in ADMISSION_ERRORS.items():
        count = c.errors.get(kind, 0)
        if not count:
            continue
        share = count / c.total
        findings.append(
            Finding(
                "admission limits",
                f"{count} of {c.total} requests ({100 * share:.1f}%) were {meaning}.",
                {"errors": count, "requests": c.total, "share": share, "kind": kind},
                ("error_rate", "goodput"),
                scenario,
            )
        )
    return findings


def engine_series(run: RunData, name: str) -> list[float]:
    return series(run.server_metrics, name)


def engine_findings(run: RunData) -> list[Finding]:
    """Queueing, KV-cache pressure and preemptions as the engine reported them."""
    findings = []
    waiting = engine_series(run, "waiting")
    queued = sum(w >= 1 for w in waiting)
    if queued >= MIN_QUEUED_SCRAPES or max(waiting, default=0) >= MIN_QUEUE_DEPTH:
        running = engine_series(run, "running")
        running_text = f" while up to {max(running):g} ran" if running else ""
        findings.append(
            Finding(
                "capacity-bound",
                f"Requests waited in the engine's queue: up to {max(waiting):g} waiting"
                f"{running_text}, in {queued} of {len(waiting)} scrapes (mean "
                f"{sum(waiting) / len(waiting):.1f}). Time in that queue is part of TTFT: "
                "the deployment is at capacity for this load.",
                {
                    "waiting_max": max(waiting),
                    "waiting_mean": sum(waiting) / len(waiting),
                    "scrapes_with_queue": queued,
                    "scrapes": len(waiting),
                    "running_max": max(running) if running else None,
                },
                QUEUE_METRICS,
            )
        )
    usage = engine_series(run, "kv_cache_usage")
    if usage and max(usage) >= KV_NEAR_FULL:
        findings.append(
            Finding(
                KV_FULL,
                f"The KV cache was near full: usage peaked at {100 * max(usage):.0f}% "
                f"(at or above {100 * KV_NEAR_FULL:.0f}% in "
                f"{sum(u >= KV_NEAR_FULL for u in usage)} of {len(usage)} scrapes). New "
                "requests wait for blocks to free: context length x concurrency exceeds "
                "the cache (see `slogate plan`).",
                {"kv_usage_max": max(usage), "scrapes": len(usage)},
                QUEUE_METRICS,
            )
        )
    preemptions = engine_series(run, "preemptions_total")
    if len(preemptions) >= 2 and preemptions[-1] > preemptions[0]:
        count = preemptions[-1] - preemptions[0]
        findings.append(
            Finding(
                KV_FULL,
                f"The engine preempted {count:g} running requests to free KV-cache blocks; "
                "each recomputes its prompt, adding a stall to its stream.",
                {"preemptions": count},
                (*QUEUE_METRICS, ITL.key, TPOT.key),
            )
        )
    return findings


def offered_rate(scenario_meta: Mapping[str, Any]) -> float | None:
    return rate_rps((scenario_meta.get("load") or {}).get("rate"))


def rate_rps(rate: Any) -> float | None:
    """An open-loop rate's arrivals per second as the run recorded it (a trace's
    mean rate at its speed-up); None for closed loop."""
    rps = rate.get("rps") if isinstance(rate, Mapping) else None
    return float(rps) if rps else None


def keep_up_findings(run: RunData, scenario: str, bucket: Bucket) -> list[Finding]:
    """Open loop: a server that completes fewer requests than arrive is saturated.

    Requests that arrive within one E2E of the window's end cannot complete in
    it, so the rate expected of a server that keeps up is the offered rate less
    that edge: offered x (1 - E2E mean / window)."""
    declared = (run.meta.get("scenarios") or {}).get(scenario) or {}
    offered, seconds = offered_rate(declared), run.meta.get("measured_s")
    histograms = bucket.histograms
    if offered is None or not seconds or E2E.name not in histograms:
        return []
    e2e_s = histograms.histogram(E2E.name).get_mean_value() / US_PER_MS / 1000.0
    expected = offered * max(1.0 - e2e_s / seconds, 0.0)
    completed = bucket.counters.ok / seconds
    if completed >= KEEP_UP_FRACTION * expected:
        return []
    return [
        Finding(
            "capacity-bound",
            f"The server did not keep up with the offered load: {offered:g} requests/s "
            f"arrived, {completed:.2f}/s completed, {100 * completed / expected:.0f}% of the "
            f"{expected:.2f}/s a server keeping up completes in a {seconds:g} s window at "
            f"E2E {1000 * e2e_s:.0f} ms. The rest queued, so TTFT grew through the run.",
            {
                "offered_per_s": offered,
                "completed_per_s": completed,
                "expected_per_s": expected,
                "e2e_mean_ms": 1000 * e2e_s,
            },
            QUEUE_METRICS,
            scenario,
        )
    ]


def banded(bucket: Bucket, prefix: str) -> list[tuple[int, float, int]]:
    """(band lower bound, p50 in ms, samples) of ``<prefix><N>`` histograms with
    enough samples, by band."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    rows = []
    for name, histogram in bucket.histograms:
        match = pattern.match(name)
        n = histogram.get_total_count()
        if match and n >= MIN_GROUP_SAMPLES:
            rows.append(
                (int(match.group(1)), histogram.get_value_at_percentile(50.0) / US_PER_MS, n)
            )
    return sorted(rows)


def rising(values: Sequence[float], keys: Sequence[float], growth: float) -> float | None:
    """Spearman's rho when ``values`` rise with ``keys`` (rho >= 0.8 and last/first
    >= ``growth``), else None."""
    if len(values) < MIN_GROUPS or values[0] <= 0 or len(set(values)) == 1:
        return None
    from scipy.stats import (
        spearmanr,  # imported here: scipy.stats costs every load process about 70 MB
    )

    rho = float(spearmanr(keys, values).statistic)
    if math.isnan(rho) or rho < MIN_RANK_CORRELATION or values[-1] / values[0] < growth:
        return None
    return rho


def band_text(rows: list[tuple[int, float, int]]) -> str:
    return ", ".join(f"{band_label(lower)} tokens: {p50:.0f} ms" for lower, p50, _ in rows)


def prefill_findings(scenario: str, bucket: Bucket) -> list[Finding]:
    findings = []
    bands = banded(bucket, TTFT_BY_INPUT)
    rho = rising([p for _, p, _ in bands], [b for b, _, _ in bands], TTFT_MIN_GROWTH)
    if rho is not None:
        first, last = bands[0], bands[-1]
        findings.append(
            Finding(
                "prefill-bound",
                f"TTFT tracks input length: TTFT p50 by input tokens {band_text(bands)} "
                f"(x{last[1] / first[1]:.1f} for x{last[0] / max(first[0], 1):.0f} the tokens; "
                f"rank correlation {rho:.2f}). Prefill is compute-bound and grows with the "
                "prompt: shorten prompts, reuse prefixes, or use chunked prefill and a "
                "faster GPU.",
                {
                    "bands": {band_label(b): p for b, p, _ in bands},
                    "growth": last[1] / first[1],
                    "rank_correlation": rho,
                },
                WAIT_METRICS,
                scenario,
            )
        )
    turns = banded(bucket, "ttft_turn_")
    rho = rising([p for _, p, _ in turns], [t for t, _, _ in turns], TTFT_MIN_GROWTH)
    if rho is not None:
        text = ", ".join(f"turn {t}: {p:.0f} ms" for t, p, _ in turns)
        findings.append(
            Finding(
                "prefill-bound",
                f"TTFT rises with the conversation's turn: TTFT p50 {text} (rank correlation "
                f"{rho:.2f}). Each turn resends the whole, longer history, so its prefill "
                "grows; prefix caching of the history avoids recomputing it.",
                {
                    "turns": {str(t): p for t, p, _ in turns},
                    "growth": turns[-1][1] / turns[0][1],
                    "rank_correlation": rho,
                },
                WAIT_METRICS,
                scenario,
            )
        )
    return findings


def decode_findings(scenario: str, bucket: Bucket) -> list[Finding]:
    bands = banded(bucket, TPOT_BY_CONTEXT)
    rho = rising([p for _, p, _ in bands], [b for b, _, _ in bands], TPOT_MIN_GROWTH)
    if rho is None:
        return []
    text = ", ".join(f"{band_label(b)} tokens: {p:.1f} ms" for b, p, _ in bands)
    return [
        Finding(
            "attention / KV reads",
            f"TPOT rises with context length: TPOT p50 by context {text} (x"
            f"{bands[-1][1] / bands[0][1]:.2f}; rank correlation {rho:.2f}). Every decode step "
            "reads the whole KV cache, so long contexts slow each token: cap max_tokens and "
            "context, quantize the KV cache, or spread long requests over more replicas.",
            {
                "bands": {band_label(b): p for b, p, _ in bands},
                "growth": bands[-1][1] / bands[0][1],
                "rank_correlation": rho,
            },
            DECODE_METRICS,
            scenario,
        )
    ]


# -- putting it together ---------------------------------------------------------------
def missed(result: SloResult) -> bool:
    """Failed; or invalid (the load generator's error could have flipped it) or
    inconclusive (too few samples to bound it) with its value past the limit:
    the data still shows a miss to explain."""
    if result.verdict is Verdict.FAIL:
        return True
    return (
        result.verdict in (Verdict.INVALID, Verdict.INCONCLUSIVE)
        and result.value is not None
        and point_verdict(result.threshold, result.value) is Verdict.FAIL
    )


def failed_slos(verdict: RunVerdict) -> list[tuple[str, str, str]]:
    """(scenario, metric, SLO name) of every missed or inconclusive SLO."""
    return [
        (r.scenario, r.threshold.metric, r.name)
        for r in verdict.results
        if missed(r) or r.verdict is Verdict.INCONCLUSIVE
    ]


def attach(finding: Finding, failed: list[tuple[str, str, str]]) -> Finding:
    """The failed SLOs the finding explains: of its metrics, those it measured
    a share of only where that share reaches ``MIN_SHARE``."""
    explains = tuple(
        f"{scenario}: {name}"
        for scenario, metric, name in failed
        if (finding.scenario in (None, scenario))
        and ("*" in finding.metrics or metric in finding.metrics)
        and finding.share.get(metric, MIN_SHARE) >= MIN_SHARE
    )
    return replace(finding, explains=explains)


def failed_limits(verdict: RunVerdict) -> dict[str, dict[str, float]]:
    """Per scenario, each missed latency SLO's metric and its (lowest) limit."""
    limits: dict[str, dict[str, float]] = {}
    for r in verdict.results:
        metric = r.threshold.metric
        if missed(r) and r.threshold.kind == "max" and metric in LATENCY_SLOS:
            mine = limits.setdefault(r.scenario, {})
            mine[metric] = min(mine.get(metric, r.threshold.limit), r.threshold.limit)
    return limits


def with_kv_share(findings: list[Finding]) -> list[Finding]:
    """The engine's KV-cache findings get, per metric, the largest share of a
    miss that a symptom of a full cache (queueing for blocks, preemptions)
    explains: the client cannot tell a wait for KV blocks from any other wait,
    the engine's gauges can."""
    share: dict[str, float] = {}
    for f in findings:
        if f.cause in KV_SYMPTOMS:
            for metric, value in f.share.items():
                share[metric] = max(share.get(metric, 0.0), value)
    return [replace(f, share=dict(share)) if f.cause == KV_FULL else f for f in findings]


def confirmed(finding: Finding, run: RunData, engine: str | None) -> Finding:
    """The finding with the setting to try and the engine metrics' answer
    (none for a cause no rule reads, such as the engine's own queue)."""
    advised = replace(
        finding, action=action(finding.cause, engine), remedies=remedies(finding.cause, engine)
    )
    answer = confirm(finding.cause, run.server_metrics)
    if answer is None:
        return advised
    state, text = answer
    return replace(advised, confirmation=state, engine_text=text)


def rank(finding: Finding) -> tuple[bool, bool, bool, float]:
    """The generator first (it voids the rest), then what explains a failed SLO,
    what the engine does not contradict, and the largest share of a miss."""
    explained = [finding.share[m] for m in finding.share if any(m in e for e in finding.explains)]
    return (
        "*" not in finding.metrics,
        not finding.explains,
        finding.confirmation == DISAGREE,
        -max(explained, default=0.0),
    )


def release_findings(run: RunData) -> list[Finding]:
    """An engine that kept generating for connections the client had closed:
    its running-requests gauge did not come back within the bound."""
    release = run.meta.get("server_release") or {}
    if release.get("released") is not False:
        return []
    closed = release["cancelled"] + release["cancelled_at_stop"]
    return [
        Finding(
            "server kept closed requests",
            f"{release['running_after']:g} requests still ran {release['waited_s']:g} s after "
            f"the load ended ({release['running_before']:g} before the run), after the client "
            f"closed {closed} connections: the engine goes on generating for clients that left, "
            "and that capacity serves nobody.",
            dict(release),
            (),
        )
    ]


def diagnose(run: RunData, verdict: RunVerdict | None = None) -> list[Finding]:
    """Every cause the run's data shows, each with its numbers; the ones that
    explain a failed SLO first, by how much of the miss they explain. Pass
    ``verdict`` when already evaluated."""
    verdict = verdict or evaluate_run(run)
    findings = generator_findings(run) + engine_findings(run) + release_findings(run)
    timelines = run.timelines if run.timelines is not None else Timelines()
    for scenario in run.scenario_names():
        bucket = run.overall(scenario)
        findings += same_read_findings(scenario, bucket)
        findings += admission_findings(scenario, bucket)
        findings += keep_up_findings(run, scenario, bucket)
        if scenario not in timelines.scenarios:
            findings += prefill_findings(scenario, bucket)
        findings += decode_findings(scenario, bucket)
        findings += member_findings(scenario, "replica", run.replicas(scenario))
        findings += member_findings(scenario, "endpoint", run.endpoints(scenario))
    findings = with_kv_share(findings + timeline_findings(timelines, failed_limits(verdict)))
    failed = failed_slos(verdict)
    engine = engine_family(run.meta, run.server_metrics)
    attached = [confirmed(attach(f, failed), run, engine) for f in findings]
    return sorted(attached, key=rank)


def findings_to_dicts(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """JSON form for summary.json and the report."""
    return [
        {
            "cause": f.cause,
            "scenario": f.scenario,
            "text": f.text,
            "evidence": f.evidence,
            "explains": list(f.explains),
            "share": dict(f.share),
            "engine_metrics": f.confirmation,
            "engine_text": f.engine_text,
            "action": f.action,
            "remedies": [r.to_dict() for r in f.remedies],
        }
        for f in findings
    ]
