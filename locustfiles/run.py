"""Locust entry point of `slogate run`: the scenario comes from `--scenario`."""

from locustfiles.plugin import use
from locustfiles.shape import SlogateShape
from locustfiles.users import OpenLoopUser, SlogateUser

use("chat")

__all__ = ["OpenLoopUser", "SlogateShape", "SlogateUser"]
