"""The scenario a master ships to its workers, so that a worker needs only the
installed package: no scenario file, trace or dataset on its own disk.

The master sends the files the scenario reads (the scenario or mix file, its
members, and every file its values name: traces, datasets, tokenizers), with
paths relative to their common folder so that relative references still
resolve, and the command-line overrides. A built-in scenario travels as its
name: the worker's package has it (the versions are checked to be the same).
The worker writes the files into a private temporary folder and loads them
with its own code; both sides then hash the scenarios as they understood them
(``digest``). A worker whose version or digest differs from the master's is
refused: the same files parsed by other code are not the same workload.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slogate import scenarios
from slogate.locustfiles.provenance import tool_version
from slogate.scenarios.loader import BUILTIN_DIR
from slogate.scenarios.model import Scenario

__all__ = ["MAX_SHIPPED_BYTES", "Shipment", "ShippingError", "digest", "pack", "refusal", "unpack"]

# What one master may send each worker: a trace of a few million rows fits.
MAX_SHIPPED_BYTES = 512 * 1024 * 1024


class ShippingError(ValueError):
    """The scenario cannot be shipped, or what arrived cannot be used."""


@dataclass(frozen=True, slots=True)
class Shipment:
    """What crosses the wire, as a plain mapping for Locust's message channel."""

    version: str
    main: str  # the file to load: relative to the shipped files, or a built-in's
    builtin: bool
    files: dict[str, bytes]
    overrides: dict[str, Any]
    digest: str

    def to_message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> Shipment:
        return cls(**data)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _named_files(value: Any, base: Path) -> set[Path]:
    """Every file a scenario mapping's string values name, relative to ``base``."""
    if isinstance(value, dict):
        return set().union(*(_named_files(v, base) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_named_files(v, base) for v in value))
    if isinstance(value, str) and value and "\n" not in value and len(value) < 4096:
        path = Path(value).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            return {path.resolve()} if path.is_file() else set()
        except OSError:
            return set()
    return set()


def scenario_files(main: Path, loaded: list[Scenario]) -> set[Path]:
    """The files loading ``main`` reads, outside the package's own data."""
    files = {main.resolve()}
    for scenario in loaded:
        source = Path(scenario.source).resolve()
        files.add(source)
        files |= _named_files(scenario.raw, source.parent)
    return {f for f in files if not _inside(f, BUILTIN_DIR)}


def digest(loaded: list[Scenario], files: dict[str, bytes]) -> str:
    """The scenarios as this process's code resolved them (workload, load,
    SLOs, seed; not where the files lie) and the bytes of the files behind them."""
    from slogate.locustfiles.session import scenario_meta

    resolved = []
    for scenario in loaded:
        meta = scenario_meta(scenario)
        meta.pop("source")
        resolved.append({"name": scenario.name, "seed": scenario.seed, **meta})
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())}
    text = json.dumps({"scenarios": resolved, "files": hashes}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pack(main: Path, overrides: dict[str, Any], loaded: list[Scenario]) -> Shipment:
    """The master's shipment of ``main`` (already loaded as ``loaded``)."""
    main = main.resolve()
    if _inside(main, BUILTIN_DIR):
        name = str(main.relative_to(BUILTIN_DIR))
        return Shipment(tool_version(), name, True, {}, overrides, digest(loaded, {}))
    paths = sorted(scenario_files(main, loaded))
    root = Path(os.path.commonpath([p.parent for p in paths]))
    total = sum(p.stat().st_size for p in paths)
    if total > MAX_SHIPPED_BYTES:
        raise ShippingError(
            f"{main}: the scenario's files are {total:,} bytes, over the {MAX_SHIPPED_BYTES:,} "
            "a master ships to its workers"
        )
    files = {str(p.relative_to(root)): p.read_bytes() for p in paths}
    return Shipment(
        tool_version(),
        str(main.relative_to(root)),
        False,
        files,
        overrides,
        digest(loaded, files),
    )


def unpack(shipment: Shipment) -> tuple[list[Scenario], str]:
    """The worker's side: the shipped files written into a private temporary
    folder, loaded by this process's code; the scenarios and their digest."""
    if shipment.builtin:
        main = BUILTIN_DIR / shipment.main
    else:
        folder = Path(tempfile.mkdtemp(prefix="slogate-scenario-")).resolve()
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        for name, data in shipment.files.items():
            path = (folder / name).resolve()
            if not _inside(path, folder):
                raise ShippingError(f"shipped file {name!r} lies outside its folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        main = folder / shipment.main
    loaded = scenarios.load(main, shipment.overrides)
    return loaded, digest(loaded, shipment.files)


def refusal(shipment: Shipment, version: str, got_digest: str | None, error: str | None) -> str:
    """Why the master refuses a worker that answered its shipment with
    ``version`` and ``got_digest`` (or could not load it: ``error``); empty when accepted."""
    if version != shipment.version:
        return f"slogate version {version}, the master's is {shipment.version}"
    if error:
        return f"it could not load the shipped scenario: {error}"
    if got_digest != shipment.digest:
        return f"scenario digest {got_digest}, the master's is {shipment.digest}"
    return ""
