"""Locust entry point for the built-in rag scenario (`--scenario` or SLOGATE_SCENARIO
runs another one): `locust -f locustfiles/rag.py --headless -u N -r R -t 60s --host URL`."""

from slogate.locustfiles.plugin import use
from slogate.locustfiles.shape import SlogateShape
from slogate.locustfiles.users import OpenLoopUser, SlogateUser

use("rag")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
