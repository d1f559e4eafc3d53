"""Energy per output token and per request: the arithmetic by hand, the simulated
engine's DCGM endpoint read as dcgm-exporter's, and a real run that reports it."""

from __future__ import annotations

import urllib.request

import pytest
from loadruns import scenario_file, slogate, summary
from reportdata import realistic_run

from slogate.analysis.engine_side.energy import energy_block
from slogate.analysis.engine_side.server_metrics import DCGM, snapshot
from slogate.reports import write_results
from slogate.simengine.power import PowerModel


def dcgm(t_s: float, joules: float) -> dict:
    return {"t_s": t_s, "source": "dcgm", "series": {"gpu_energy_joules": joules}}


def test_energy_of_the_measured_window_by_hand() -> None:
    """Scrapes at 12 s (10 000 J) and 52 s (30 000 J): 500 W mean; over the 50 s
    window 10..60 s that is 25 000 J, for 100 000 output tokens 0.25 J each and
    for 400 requests 62.5 J each. Scrapes outside the window and the engine's
    own samples are not used."""
    engine = {"t_s": 30.0, "source": "engine", "series": {"gpu_energy_joules": 9e9}}
    samples = [dcgm(5.0, 1.0), dcgm(12.0, 10_000.0), engine, dcgm(52.0, 30_000.0), dcgm(61.0, 9e9)]
    block = energy_block(samples, (10.0, 60.0), output_tokens=100_000, requests=400)
    assert block["mean_power_w"] == pytest.approx(500.0)
    assert block["joules"] == pytest.approx(25_000.0)
    assert block["per_output_token_j"] == pytest.approx(0.25)
    assert block["per_request_j"] == pytest.approx(62.5)
    assert block["scraped_s"] == [12.0, 52.0]
    assert energy_block(samples[:2], (10.0, 60.0), 1, 1) is None  # one scrape inside
    assert energy_block([], (0.0, 60.0), 1, 1) is None


def test_the_power_model_reads_as_dcgm_exporter_text() -> None:
    """2 GPUs, 70 W idle and 700 W busy, 100 s of which 40 busy: 70 x 100 + 630 x 40
    = 32 200 J each; the scraper sums the GPUs: 64 400 J."""
    model = PowerModel(idle_w=70.0, busy_w=700.0, gpus=2)
    assert model.energy_j(100.0, 40.0) == pytest.approx(32_200.0)
    text = model.dcgm_text(100.0, 40.0, busy_now=True, gpu_name="NVIDIA H100 SXM 80GB")
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    mapped = snapshot(text, DCGM)
    assert mapped.series["gpu_energy_joules"] == pytest.approx(64_400.0)


def test_energy_appears_in_every_output(tmp_path) -> None:
    run = realistic_run(n=2000, seed=6)
    run.meta.update(warmup_s=0.0, measured_s=60.0)
    run.server_metrics = [dcgm(1.0, 100.0), dcgm(59.0, 100.0 + 58 * 300.0)]  # 300 W
    outcome = write_results(tmp_path, run)
    energy = outcome.summary["energy"]
    tokens = run.overall("chat").counters.output_tokens
    assert energy["joules"] == pytest.approx(18_000.0)
    assert energy["per_output_token_j"] == pytest.approx(18_000.0 / tokens)
    report = (tmp_path / "report.html").read_text()
    assert '<h2 id="energy">Energy</h2>' in report and "300 W" in report
    assert "J per output token" in (tmp_path / "summary.md").read_text()
    metrics = (tmp_path / "metrics.prom").read_text()
    assert 'per="output_token"' in metrics and "slogate_energy_joules{" in metrics


@pytest.mark.slow
def test_a_run_on_the_simulated_engine_reports_its_energy_per_token(tmp_path) -> None:
    """One H100 (70 W idle, 700 W busy): the mean power lies between the two."""
    from slogate.engines.simulated import start_engine

    scenario = scenario_file(tmp_path, "exact-open", load={"rate": {"rps": 4}, "duration": "20s"})
    with start_engine("llama-3.1-8b@h100") as engine:
        with urllib.request.urlopen(f"{engine.url}/dcgm/metrics", timeout=10) as response:
            assert b"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in response.read()
        done = slogate("run", str(scenario), "--host", engine.url, "--out", str(tmp_path / "out"),
                       "--dcgm-url", f"{engine.url}/dcgm/metrics")  # fmt: skip
    assert done.returncode in (0, 3), done.stderr[-3000:]
    s = summary(tmp_path / "out")
    energy = s["energy"]
    assert 70.0 < energy["mean_power_w"] < 700.0
    tokens = sum(b["tokens"]["output"] for b in s["scenarios"].values())
    assert energy["output_tokens"] == tokens > 0
    assert energy["per_output_token_j"] == pytest.approx(energy["joules"] / tokens)
