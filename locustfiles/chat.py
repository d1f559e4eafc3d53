"""Locust entry point for the built-in chat scenario (`--scenario` or SLOGATE_SCENARIO
runs another one): `locust -f locustfiles/chat.py --headless -u N -r R -t 60s --host URL`."""

from locustfiles.plugin import use
from locustfiles.shape import SlogateShape
from locustfiles.users import OpenLoopUser, SlogateUser

use("chat")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
