"""The web UI: on 127.0.0.1 unless told otherwise, behind a login when it is not,
its start form filled with the scenario's load, the report written when the
load ends and served from the UI while it stays up."""

from __future__ import annotations

import http.cookiejar
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser, BrowserError
from loadruns import ROOT, cli, free_port, locust_command
from webui import post, template_args, wait_for

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


def cli_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "slogate.cli"]


CLICK_TEXT = """((text) => {
  const found = [...document.querySelectorAll("button, [role=tab], a")].find(
    e => e.textContent.trim() === text);
  if (!found) return null;
  const r = found.getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
})(%s)"""


def click_text(browser: Browser, text: str) -> None:
    """A real mouse click on the button, tab or link whose text is ``text``."""
    where = browser.wait_for(CLICK_TEXT % json.dumps(text))
    browser.mouse("click", *where)


def show_results(browser: Browser, base: str) -> None:
    """Open the Download Data tab of Locust's page once the load ended. The page
    picks its start form or its tabs from the run's state as its own polls last
    heard it, and in one CI run under load it still showed the start form 60 s
    after the run had started and ended: then the page is loaded afresh (as its
    user would), which asks the server, and the tab must be there."""
    tab = CLICK_TEXT % json.dumps("Download Data")
    try:
        where = browser.wait_for(tab, timeout_s=20)
    except TimeoutError:
        assert browser.evaluate("!!document.querySelector('input[name=userCount]')"), (
            "neither the results' tabs nor the start form"
        )
        browser.open(f"{base}/")
        where = browser.wait_for(tab)
    browser.mouse("click", *where)


def open_when_up(browser: Browser, url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            browser.open(url)
            return
        except BrowserError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_in_a_browser_the_form_is_filled_and_the_report_is_linked_when_the_load_ends(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine, Browser(tmp_path / "b") as browser:
        refused = subprocess.run(
            [*cli_command(), "run", "tests/data/exact-chat.yaml", "--web-ui", "--host", engine.url,
             "--web-host", "0.0.0.0", "--web-port", str(port), "--out", str(tmp_path / "no")],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert refused.returncode == 2 and "--web-auth" in refused.stderr
        with pytest.raises(BrowserError, match="ERR_CONNECTION_REFUSED"):
            browser.open(f"{base}/")  # nothing listened, on any interface
        ui = subprocess.Popen(
            [*cli_command(), "run", "tests/data/exact-chat.yaml", "--web-ui", "--host", engine.url,
             "--web-port", str(port), "--duration", "3s", "--out", str(tmp_path / "o")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        try:
            open_when_up(browser, f"{base}/")
            browser.wait_for("!!document.querySelector('input[name=userCount]')")
            form = browser.evaluate(
                "Object.fromEntries([...document.querySelectorAll('form input')]"
                ".map(i => [i.name, i.value]))"
            )
            assert (form["userCount"], form["spawnRate"], form["runTime"]) == ("4", "4", "3s")
            assert form["host"] == engine.url
            click_text(browser, "Start")
            report = (tmp_path / "o" / "report.html").as_posix()
            deadline = time.monotonic() + 90
            while not Path(report).exists():
                assert time.monotonic() < deadline, "no report 90 s after the start"
                time.sleep(0.3)
            show_results(browser, base)
            link = browser.wait_for(
                "[...document.querySelectorAll('a')].map(a => a.href)"
                ".find(h => h.endsWith('/slogate/report'))"
            )
            assert link == f"{base}{REPORT_ROUTE}"
            click_text(browser, "slogate report (written when the load ends)")
            browser.wait_for("location.pathname === '/slogate/report'")
            browser.wait_for(
                "document.readyState === 'complete' && !!document.querySelector('.banner')"
            )
            assert browser.evaluate("document.querySelector('.banner .word').textContent") == "PASS"
            click_text(browser, "request timeline")
            browser.wait_for("location.pathname === '/slogate/timeline.html'")
            browser.wait_for("document.readyState === 'complete'")
            bars = browser.evaluate("document.querySelectorAll('svg.timeline g.req').length")
            assert bars >= 4
            assert ui.poll() is None  # the results written when the load ended, the UI still up
            assert browser.errors == []
        finally:
            ui.terminate()
            ui.communicate(timeout=60)
