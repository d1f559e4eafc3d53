"""Cost per million tokens of each kind, goodput tokens among them, by hand, in
every output; and the recorder's count of goodput tokens."""

from __future__ import annotations

import pytest
from reportdata import realistic_run

from slogate.reports import write_results


def test_the_price_per_million_tokens_of_each_kind_by_hand(tmp_path) -> None:
    """60 s measured at 2 GPUs x 2.5/h (5 an hour): 240 000 output tokens are
    4000/s, so a million cost 5 / (4000 x 3600) x 1e6 = 0.34722; 180 000 of them
    from requests within every limit (3000/s): 0.46296; 1 200 000 input tokens
    (20 000/s): 0.069444."""
    run = realistic_run(n=2000, seed=4)
    run.meta["measured_s"] = 60.0
    run.meta["pricing"] = {"gpu_price_per_hour": 2.5, "gpus": 2}
    counters = run.overall("chat").counters
    counters.output_tokens, counters.good_output_tokens = 240_000, 180_000
    counters.input_tokens = 1_200_000
    outcome = write_results(tmp_path, run)
    block = outcome.summary["scenarios"]["chat"]
    assert block["throughput"]["goodput_tokens_per_s"] == pytest.approx(3000.0)
    cost = block["cost"]
    assert cost["per_million_output_tokens"] == pytest.approx(0.34722, abs=1e-5)
    assert cost["per_million_goodput_tokens"] == pytest.approx(0.46296, abs=1e-5)
    assert cost["per_million_input_tokens"] == pytest.approx(0.069444, abs=1e-6)
    report = (tmp_path / "report.html").read_text()
    assert "per 1M goodput tokens<b>0.463</b>" in report and "per 1M input tokens" in report
    markdown = (tmp_path / "summary.md").read_text()
    assert "- chat cost per 1M tokens at 2 GPU x 2.5/h: output 0.347, input 0.0694" in markdown
    metrics = (tmp_path / "metrics.prom").read_text()
    assert 'kind="goodput"' in metrics and "slogate_cost_per_million_tokens{" in metrics


def test_goodput_tokens_are_the_output_of_requests_within_every_limit() -> None:
    from slogate.analysis.measurement.recorder import Counters

    a, b = Counters(ok=2, good=1, output_tokens=300, good_output_tokens=100), Counters()
    b.good_output_tokens = 50
    a.add(b)
    assert a.good_output_tokens == 150
    assert Counters.from_dict(a.to_dict()).good_output_tokens == 150
    assert Counters.from_dict({"ok": 1}).good_output_tokens == 0  # data saved before it
