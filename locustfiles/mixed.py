"""Locust entry point for the built-in mixed scenario (`--scenario` or SLOGATE_SCENARIO
runs another one): `locust -f locustfiles/mixed.py --headless -u N -r R -t 60s --host URL`."""

from locustfiles.plugin import use
from locustfiles.shape import SlogateShape
from locustfiles.users import OpenLoopUser, SlogateUser

use("mixed")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
