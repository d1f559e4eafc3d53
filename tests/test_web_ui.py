"""The web UI: on 127.0.0.1 unless told otherwise, behind a login when it is not,
its start form filled with the scenario's load, the report written when the
load ends and served from the UI while it stays up."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from loadruns import ROOT, cli, free_port, locust_command

from slogate.engines.exact import ExactEngine
from slogate.locustfiles.web_access import AUTH_ENV, REPORT_ROUTE, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("localhost", True),
     ("", False), ("*", False), ("0.0.0.0", False), ("192.168.1.4", False), ("::", False),
     ("build-host.example", False)],
)  # fmt: skip
def test_only_loopback_addresses_are_this_machine_alone(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_slogate_run_refuses_a_network_web_ui_without_a_login() -> None:
    done = cli("run", "chat", "--web-ui", "--web-host", "0.0.0.0", "--host", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert "--web-host 0.0.0.0" in done.stderr and "--web-auth USER:PASSWORD" in done.stderr
    assert "--web-insecure" in done.stderr


def test_a_malformed_login_is_a_usage_error() -> None:
    done = cli("run", "chat", "--web-ui", "--web-auth", "nopassword")
    assert done.returncode == 2
    assert "--web-auth" in done.stderr and "USER:PASSWORD" in done.stderr


@pytest.mark.slow
def test_plain_locust_refuses_every_interface_before_it_listens(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        locust_command("--host", "http://127.0.0.1:9", "--scenario", "tests/data/exact-chat.yaml",
                       "--out", str(tmp_path / "o"), "--web-port", str(port)),
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "* (every interface)" in done.stderr and "--web-insecure" in done.stderr
    assert not (tmp_path / "o").exists()


def wait_for(url: str, opener: urllib.request.OpenerDirector, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with opener.open(url, timeout=5) as reply:
                return reply.read().decode()
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def template_args(page: str) -> dict:
    found = re.search(r"window\.templateArgs = (\{.*?\})\s*\n", page, re.S)
    assert found, page[:2000]
    return json.loads(found.group(1))


@pytest.mark.slow
def test_the_login_guards_the_ui_and_the_form_offers_the_scenarios_load(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine:
        ui = subprocess.Popen(
            [*cli_command(), "run", "tests/data/exact-chat.yaml", "--web-ui", "--host", engine.url,
             "--web-port", str(port), "--web-auth", "me:pa:ss", "--duration", "3s",
             "--out", str(tmp_path / "o")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        try:
            login_page = wait_for(f"{base}/", browser)  # redirected to the login page
            assert "authArgs" in login_page and "/slogate/login" in login_page
            refused = post(browser, f"{base}/slogate/login", username="me", password="pa")
            assert "authArgs" in refused and "wrong user name or password" in refused
            index = post(browser, f"{base}/slogate/login", username="me", password="pa:ss")
            args = template_args(index)
            assert (args["num_users"], args["spawn_rate"]) == (4, 4.0)
            assert "slogate_web_auth" not in args["extra_options"]  # the password is never shown
            assert "pa:ss" not in index
            ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            assert "pa:ss" not in ps  # not on Locust's command line
            form = {"user_count": "4", "spawn_rate": "4", "host": engine.url}
            started = post(browser, f"{base}/swarm", **form)
            assert json.loads(started)["success"] is True
            report = wait_for(f"{base}{REPORT_ROUTE}", browser, timeout_s=60)
            assert "slogate run" in report and "PASS" in report
            assert ui.poll() is None  # written when the load ended, the UI still up
            assert (tmp_path / "o" / "summary.json").exists()
            assert os.environ.get(AUTH_ENV) is None
        finally:
            ui.terminate()
            _, err = ui.communicate(timeout=60)
    assert "pa:ss" not in err
    assert "pa:ss" not in (tmp_path / "o" / "summary.json").read_text()


def post(opener: urllib.request.OpenerDirector, url: str, **form: str) -> str:
    data = urllib.parse.urlencode(form).encode()
    with opener.open(url, data=data, timeout=10) as reply:
        return reply.read().decode()


def cli_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "slogate.cli"]
