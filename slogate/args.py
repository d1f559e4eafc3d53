"""The argparse types of :mod:`slogate.locustfiles.argtypes`, under the name the
sweep and experiment commands import them by."""

from __future__ import annotations

from slogate.locustfiles.argtypes import positive_duration, positive_float, positive_int

__all__ = ["positive_duration", "positive_float", "positive_int"]
