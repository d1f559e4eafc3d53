"""``--save-requests``' file: processes appending to one requests.jsonl never
interleave their lines, and a closed log opens again on the next line."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from slogate.locustfiles.request_log import REQUESTS_FILE, RequestLog

LINES_EACH, PROCESSES = 2000, 4
PAD = "x" * 3000  # lines longer than a pipe's atomic 4 KiB would be if split


def append_lines(path: str, sender: int) -> None:
    log = RequestLog(Path(path))
    for i in range(LINES_EACH):
        log.write({"sender": sender, "i": i, "pad": PAD})
    log.close()


def test_processes_appending_to_one_file_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "worker-host" / REQUESTS_FILE  # the folder is made on first write
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=append_lines, args=(str(path), s)) for s in range(PROCESSES)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]  # every line whole
    assert len(lines) == LINES_EACH * PROCESSES
    for sender in range(PROCESSES):
        # in order of completion within each process
        assert [x["i"] for x in lines if x["sender"] == sender] == list(range(LINES_EACH))


def test_a_closed_log_opens_again_and_appends(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / REQUESTS_FILE)
    log.write({"n": 1})
    log.close()
    log.close()  # twice: nothing to close
    log.write({"n": 2})
    log.close()
    assert [json.loads(line)["n"] for line in log.path.read_text().splitlines()] == [1, 2]
