"""Locust entry point of `slogate run`: the scenario comes from `--scenario`."""

from slogate.locustfiles.plugin import use
from slogate.locustfiles.shape import SlogateShape
from slogate.locustfiles.users import OpenLoopUser, SlogateUser

use("chat")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
