"""argparse types shared by the subcommands."""

from __future__ import annotations

import argparse

from scenarios.units import parse_duration


def duration(text: str) -> float:
    """Seconds from ``30s``, ``5m``, ``1m30s`` or a bare number."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
