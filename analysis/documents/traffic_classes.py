"""Per traffic class: what it sent, how much of the waiting it did, what was shed.

A class is a mix member (docs/scenarios.md, "Priority classes"), judged as its
scenario by its own SLOs; beside the verdict a reader needs who paid for the
contention. The client cannot see an engine's queue, so a class's wait is
what it can see: the time its requests waited for their first token (TTFT:
the engine's queue plus the prefill), summed, and its share of all classes'
wait. A priority policy moves that share from the high class to the low one.
Shed requests (HTTP 429 or 503: a gateway's flow control or the engine's
admission refused them) are counted per class. Preemptions are the engine's
own count over the measured window, all classes together: vLLM and SGLang
report none per request or per priority.
"""

from __future__ import annotations

from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.engine_side.engine_view import engine_metrics
from slogate.analysis.measurement.recorder import Bucket
from slogate.scenarios.metrics import TTFT

US_PER_S = 1e6


def declared_class(run: RunData, name: str) -> dict[str, Any] | None:
    """The class a scenario's requests carried, as the run recorded it; None
    for a scenario that is no class."""
    declared = (run.meta.get("scenarios") or {}).get(name) or {}
    found = declared.get("class")
    return found if isinstance(found, dict) else None


def wait_s(bucket: Bucket) -> float:
    """Seconds the bucket's requests waited for their first tokens, in all."""
    ttft = bucket.histograms.histogram(TTFT.name)
    return float(ttft.get_mean_value() * ttft.get_total_count()) / US_PER_S


def class_block(run: RunData, name: str) -> dict[str, Any] | None:
    """The ``traffic_class`` block of scenario ``name``'s summary; None when
    the scenario is no class."""
    declared = declared_class(run, name)
    if declared is None:
        return None
    classes = [n for n in run.scenario_names() if declared_class(run, n) is not None]
    waits = {n: wait_s(run.overall(n)) for n in classes}
    total = sum(waits.values())
    counters = (engine_metrics(run) or {}).get("counters") or {}
    sheds = run.overall(name).counters.sheds
    return {
        "priority": declared.get("priority"),
        "headers": declared.get("headers") or {},
        "body": declared.get("body") or {},
        "wait_s": round(waits[name], 6),
        "wait_share": round(waits[name] / total, 6) if total > 0 else None,
        "sheds": {status: sheds.get(status, 0) for status in ("429", "503")},
        "engine_preemptions": counters.get("preemptions_total"),
    }
