"""The server's configuration: a profile plus how the simulation is served.

:func:`build_config` takes a profile name and flat keyword overrides, the one
form shared by ``python -m slogate.simengine --set KEY=VALUE``, ``server.run(...)``
and ``launch.start_engine(...)``. Profile settings (``max_num_seqs``,
``num_gpu_blocks``, ...) go to the profile; the rest are fields of
:class:`EngineConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from slogate.simengine.faults import Faults
from slogate.simengine.profiles import DEFAULT_PROFILE, ENGINE_SETTINGS, Profile, load_profile
from slogate.simengine.response_length import EosDistribution

PROFILE_KEYS = frozenset({*ENGINE_SETTINGS, "kv", "kv_dtype", "weight_dtype", "tp"})


@dataclass(frozen=True)
class EngineConfig:
    """Everything a simulated engine instance runs with."""

    profile: Profile
    speedup: float = 1.0  # model seconds per wall second (tests run big models fast)
    seed: int = 0
    stream_interval: int = 1  # tokens per chunk, like vLLM's --stream-interval
    served_model_name: str | None = None  # default: the model's Hugging Face id
    eos: EosDistribution = field(default_factory=EosDistribution)
    faults: Faults = field(default_factory=Faults)
    max_lateness_s: float = 0.25  # behind by more: re-anchor the clock (no catch-up burst)

    def __post_init__(self) -> None:
        if self.speedup <= 0:
            raise ValueError("speedup must be positive")
        if self.stream_interval < 1:
            raise ValueError("stream_interval must be at least 1")

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.profile.model.hf_id


def build_config(profile: str | Profile = DEFAULT_PROFILE, **overrides: Any) -> EngineConfig:
    """A config from a profile name/file/object and flat overrides.

    Besides profile settings and :class:`EngineConfig` fields, ``eos_median``
    and ``eos_p90`` set the EOS distribution and ``faults`` takes a mapping of
    fault settings (or a :class:`Faults`)."""
    profile_settings = {k: v for k, v in overrides.items() if k in PROFILE_KEYS}
    rest = {k: v for k, v in overrides.items() if k not in PROFILE_KEYS}
    kwargs: dict[str, Any] = {}
    types = {f.name: f.type for f in fields(EngineConfig)}
    eos = {}
    for key, value in rest.items():
        if key in ("eos_median", "eos_p90"):
            eos[key[4:]] = float(value)
        elif key == "faults":
            kwargs["faults"] = value if isinstance(value, Faults) else Faults().updated(value or {})
        elif key in ("speedup", "max_lateness_s"):
            kwargs[key] = float(value)
        elif key in ("seed", "stream_interval"):
            kwargs[key] = int(value)
        elif key == "served_model_name":
            kwargs[key] = None if value is None else str(value)
        else:
            known = sorted({*PROFILE_KEYS, *types, "eos_median", "eos_p90"} - {"profile", "eos"})
            raise ValueError(f"unknown engine setting {key!r}; known: {', '.join(known)}")
    if eos:
        default = EosDistribution()
        kwargs["eos"] = EosDistribution(
            median=eos.get("median", default.median), p90=eos.get("p90", default.p90)
        )
    return EngineConfig(profile=load_profile(profile, **profile_settings), **kwargs)


def parse_assignments(items: list[str] | None, what: str) -> Mapping[str, str]:
    """``["KEY=VALUE", ...]`` from the command line into a mapping."""
    result = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what} {item!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result
