"""Bad command lines and bad engines: each stops before any load is sent, with
a message naming what was wrong and the exit code of docs/design.md (2 bad
configuration, 3 the engine cannot be used). No tracebacks."""

from __future__ import annotations

import http.server
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from httpserving import serving
from loadruns import ModelsHandler, locust_command, slogate, unreachable_host

from slogate.engines.exact import ExactEngine

pytestmark = pytest.mark.slow

SCENARIO = "tests/data/exact-chat.yaml"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("run", "chat", "--host", "ftp://x"), 2, "'ftp://x': expected [NAME=]http(s)://"),
        (("run", "chat", "--host", "http://127.0.0.1:99999"), 2, "out of range"),
        (("run", "chat", "--profile", "nope"), 2, "profile 'nope'"),
        (("run", "chat", "--max-lag-ms", "-1"), 2, "--max-lag-ms: expected a number > 0"),
        (("run", "chat", "--selftest", "-1"), 2, "--selftest: expected an integer >= 0"),
        (("scenario", "sample", "chat", "-n", "-1"), 2, "-n: expected an integer >= 0"),
        (("selftest", "--streams", "0"), 2, "--streams: expected an integer >= 1"),
        (("engine", "--port", "99999"), 2, "--port 99999"),
        (("sweep", "chat", "--rates", "1", "--profile", "nope"), 2, "profile 'nope'"),
        (("experiment", "concurrency", "--host", "ftp://x"), 2, "expected http://"),
        (("compare", ".", ".", "--tolerance", "-1"), 2, "--tolerance: expected a number >= 0"),
        (("report", "."), 2, "not a slogate results folder"),
        (("sweep", "chat", "--rates", "1", "--host", "{unreachable}"), 3, "cannot reach"),
    ],
)
def test_bad_command_lines(args: tuple[str, ...], code: int, says: str) -> None:
    with unreachable_host() as host:
        done = slogate(*(arg.format(unreachable=host) for arg in args), timeout=60)
    assert done.returncode == code, done.stderr[-2000:]
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.endswith("\n")  # the shell prompt never lands on the message


@pytest.fixture(scope="module")
def engine() -> Iterator[ExactEngine]:
    with ExactEngine({"ttft_ms": 5, "itl_ms": 1}) as server:
        yield server


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--window", "0"), "--window: expected a number > 0"),
        (("--status-interval", "-1"), "--status-interval: expected a number > 0"),
        (("--baseline", "tests"), "not a slogate results folder"),
        (("--out", "{file}/out"), "cannot write the results folder: Not a directory"),
    ],
)
def test_plain_locust_rejects_bad_flags_before_any_load(engine, tmp_path, flags, says) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    flags = tuple(f.format(file=a_file) for f in flags)
    done = subprocess.run(
        locust_command("--headless", "-u", "1", "-t", "5s", "--host", engine.url,
                       "--scenario", SCENARIO, *flags),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr and done.stderr.endswith("\n")
    assert engine.truth() == []


def test_a_locustfile_that_names_no_scenario_asks_for_one(engine, tmp_path) -> None:
    """A locustfile of the user's own that loads the plugin but never calls
    ``use``, run without --scenario: a bad configuration (2), not a crash."""
    locustfile = tmp_path / "mine.py"
    locustfile.write_text(
        "import slogate.locustfiles.plugin\n"
        "from slogate.locustfiles.shape import SlogateShape\n"
        "from slogate.locustfiles.users import SlogateUser\n"
    )
    command = locust_command("--headless", "-u", "1", "-t", "5s", "--host", engine.url)
    command[command.index("-f") + 1] = str(locustfile)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no scenario: pass --scenario FILE (or set SLOGATE_SCENARIO)" in done.stderr
    assert "Traceback" not in done.stderr and "TypeError" not in done.stderr
    assert engine.truth() == []


def error_line(stderr: str) -> str:
    """argparse's message, without the program's name (``locust``, ``slogate run``)
    and the pointer to its help that ``slogate`` adds."""
    line = next(line for line in stderr.splitlines() if ": error: " in line)
    return re.sub(r" \(see [\w ]+ --help\)$", "", line.split(": error: ")[1])


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--max-lag-ms", "-1", "expected a number > 0, got '-1'"),
        ("--warmup", "soon", "expected a duration such as 500ms"),
        ("--gpus", "0", "expected an integer >= 1, got '0'"),
    ],
)
def test_a_bad_value_gets_one_error_from_plain_locust_and_slogate_run(engine, flag, value, says):
    """One declaration, one validation: the same message, naming the flag and the
    value, whichever command took it, and no request sent."""
    plain = subprocess.run(
        locust_command("--headless", "--host", engine.url, "--scenario", SCENARIO, flag, value),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    run = slogate("run", SCENARIO, "--host", engine.url, flag, value, timeout=60)
    assert plain.returncode == run.returncode == 2, plain.stderr[-2000:] + run.stderr[-2000:]
    message = error_line(run.stderr)
    assert error_line(plain.stderr) == message
    assert message.startswith(f"argument {flag}: ") and says in message and repr(value) in message
    assert engine.truth() == []


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def http_server(handler: type, requests: int | None = None) -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1: forever, or for ``requests`` requests
    and then gone (an engine that dies after answering them)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    if requests is None:
        with serving(server) as port:
            yield f"http://127.0.0.1:{port}"
        return

    def serve() -> None:
        for _ in range(requests):
            server.handle_request()
        server.server_close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        thread.join(timeout=5)


def test_a_server_that_is_no_openai_engine_exits_3(tmp_path) -> None:
    with http_server(_NotFound) as url:
        done = slogate("run", "chat", "--host", url, "--out", str(tmp_path / "o"), timeout=60)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "answered HTTP 404" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_sweep_whose_engine_died_exits_3(tmp_path) -> None:
    """The engine answers the sweep's own check, then is gone: every trial
    writes no results, and the sweep is not a success."""
    with http_server(ModelsHandler, requests=1) as url:
        done = slogate("sweep", SCENARIO, "--rates", "1", "--duration", "5s", "--host", url,
                       "--out", str(tmp_path / "sweep"), timeout=120)  # fmt: skip
    assert done.returncode == 3, done.stderr[-2000:]
    assert "1 of 1 trials wrote no results" in done.stderr
