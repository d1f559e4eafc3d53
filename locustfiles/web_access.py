"""Who may reach the web UI, and what its start form offers.

The web UI starts load with the user's API key, against the user's engine: it
listens on this machine alone (127.0.0.1) unless a login guards it
(``--web-auth USER:PASSWORD``, Locust's ``--web-login`` page) or the user
accepts anyone on the network (``--web-insecure``). Locust's own default is
every interface; both `slogate run` and plain ``locust -f`` with slogate's
plugin refuse that (exit 2) before the UI listens.

The password reaches Locust in the environment (:data:`AUTH_ENV`), never on a
command line: command lines are recorded in the results and shown by ``ps``.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from typing import Any

from slogate.locustfiles.argtypes import web_login

LOOPBACK = "127.0.0.1"
AUTH_ENV = "SLOGATE_WEB_AUTH"
REPORT_ROUTE = "/slogate/report"
# beside the report, so the report's relative link to its timeline works when served
TIMELINE_ROUTE = "/slogate/timeline.html"


def is_loopback(host: str) -> bool:
    """Only this machine can connect; '' and '*' are every interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, auth: str | None, insecure: bool) -> str | None:
    """Why the web UI may not listen on ``host`` as asked, or None."""
    if is_loopback(host) or auth or insecure:
        return None
    shown = host if host not in ("", "*") else "* (every interface)"
    return (
        f"--web-host {shown}: the web UI would take commands from the network and "
        "start load with your API key: give --web-auth USER:PASSWORD (a login page) "
        "or --web-insecure to accept that"
    )


def install_login(web_ui: Any, auth: str) -> None:
    """Locust's login page (``--web-login``) checking one user and password."""
    from flask import redirect, request, session, url_for
    from flask_login import UserMixin, login_user

    user, _, password = web_login(auth).partition(":")

    class WebUser(UserMixin):
        def get_id(self) -> str:
            return user

    if not web_ui.app.secret_key:
        web_ui.app.secret_key = os.urandom(32)
    web_ui.login_manager.user_loader(lambda name: WebUser() if name == user else None)
    web_ui.auth_args = {"username_password_callback": "/slogate/login"}

    @web_ui.app.route("/slogate/login", methods=["POST"])
    def login_submit() -> Any:
        given_user = request.form.get("username", "")
        given_password = request.form.get("password", "")
        if _same(given_user, user) & _same(given_password, password):
            login_user(WebUser())
            return redirect(url_for("locust.index"))
        session["auth_error"] = "wrong user name or password"
        return redirect(url_for("locust.login"))


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison of UTF-8 bytes: ``hmac.compare_digest``
    refuses a ``str`` with any non-ASCII character (every login with a
    password such as ``pässwort`` answered HTTP 500); ``surrogatepass`` keeps
    the undecodable bytes of an environment variable comparable too."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def fill_start_form(
    web_ui: Any, users: int | None, spawn_rate: float | None, rate: Any, duration_s: float
) -> None:
    """The start form offers the scenario's load (Locust fills it from its
    command line, where `slogate run` gives none): users, spawn rate, the
    run's duration, and the open-loop rate among slogate's options."""
    refresh = web_ui.update_template_args

    def update_template_args() -> None:
        refresh()
        args = web_ui.template_args
        args["num_users"] = args.get("num_users") or users
        args["spawn_rate"] = args.get("spawn_rate") or spawn_rate
        args["run_time"] = args.get("run_time") or f"{duration_s:g}s"
        extra = args.get("extra_options", {}).get("rate")
        if extra is not None and extra.get("default_value") is None and rate is not None:
            extra["default_value"] = rate

    web_ui.update_template_args = update_template_args
    update_template_args()
