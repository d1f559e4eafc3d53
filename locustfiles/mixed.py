"""Locust entry point for the built-in mixed scenario (`--scenario` or SLOGATE_SCENARIO
runs another one): `locust -f locustfiles/mixed.py --headless -u N -r R -t 60s --host URL`."""

from slogate.locustfiles.plugin import use
from slogate.locustfiles.shape import SlogateShape
from slogate.locustfiles.users import OpenLoopUser, SlogateUser

use("mixed")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
