"""What a master ships its workers: the scenario's files, loaded again on the
other side to the same digest; a worker of another version or digest refused."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from loadruns import ROOT

from slogate import scenarios
from slogate.locustfiles.provenance import tool_version
from slogate.locustfiles.shipping import ShippingError, pack, refusal, unpack
from slogate.locustfiles.worker_clocks import best_offset
from slogate.scenarios.loader import resolve


def scenario_with_data(folder):
    """exact-chat with its prompt lengths in a CSV file one folder down."""
    raw = yaml.safe_load((ROOT / "tests" / "data" / "exact-chat.yaml").read_text())
    raw["workload"]["input_tokens"] = {"dist": "empirical", "file": "data/n.csv", "column": "n"}
    (folder / "data").mkdir()
    (folder / "data" / "n.csv").write_text("n\n10\n20\n")
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def shipped(path, overrides=None):
    return pack(path, overrides or {}, scenarios.load(path, overrides or {}))


def test_a_scenario_and_the_files_it_names_arrive_and_load_to_the_same_digest(tmp_path):
    shipment = shipped(scenario_with_data(tmp_path), {"seed": 5, "users": 3})
    assert set(shipment.files) == {"s.yaml", "data/n.csv"}
    assert shipment.version == tool_version()
    loaded, digest = unpack(shipment)
    assert digest == shipment.digest
    assert not loaded[0].source.startswith(str(tmp_path))  # read from the worker's own copy
    assert loaded[0].seed == 5 and loaded[0].load.users == 3
    assert refusal(shipment, tool_version(), digest, None) == ""


def test_the_digest_changes_with_the_data_and_the_overrides(tmp_path):
    path = scenario_with_data(tmp_path)
    first = shipped(path)
    assert shipped(path, {"seed": 1}).digest != first.digest
    (tmp_path / "data" / "n.csv").write_text("n\n10\n30\n")
    assert shipped(path).digest != first.digest


def test_a_worker_of_another_version_or_digest_is_refused_naming_both(tmp_path):
    path = scenario_with_data(tmp_path)
    shipment = shipped(path)
    other = shipped(path, {"seed": 9}).digest
    reason = refusal(shipment, "0.0.1", shipment.digest, None)
    assert "0.0.1" in reason and shipment.version in reason
    reason = refusal(shipment, shipment.version, other, None)
    assert other in reason and shipment.digest in reason
    reason = refusal(shipment, shipment.version, None, "no such file")
    assert "could not load" in reason and "no such file" in reason


def test_a_builtin_scenario_travels_by_name():
    shipment = shipped(resolve("mixed"))
    assert shipment.builtin and shipment.main == "mixed.yaml" and shipment.files == {}
    loaded, digest = unpack(shipment)
    assert [s.name for s in loaded] == ["chat", "rag", "code"]
    assert digest == shipment.digest


def test_a_shipped_path_outside_its_folder_is_refused(tmp_path):
    shipment = shipped(scenario_with_data(tmp_path))
    bad = dataclasses.replace(shipment, files={**shipment.files, "../escape.yaml": b"x"})
    with pytest.raises(ShippingError, match="outside"):
        unpack(bad)


def test_the_clock_offset_is_the_shortest_round_trip_midpoint():
    # (sent, master, received): the master's clock 2 s behind; queueing skews the slow samples
    samples = [(10.0, 8.30, 10.9), (11.0, 9.05, 11.1), (12.0, 10.5, 12.6)]
    offset = best_offset(samples)
    assert offset.offset_s == pytest.approx(2.0)
    assert offset.error_s == pytest.approx(0.05)
    with pytest.raises(ValueError):
        best_offset([])
