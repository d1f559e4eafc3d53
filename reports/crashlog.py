"""The traceback of a command that failed unexpectedly, written to a file.

Exit codes are a contract (docs/reliability.md): an unexpected exception ends
any command with exit 3 and one line on stderr that names the log file; the
traceback goes to that file, never to the terminal, where a CI log would bury
the verdict under it. The file goes in the folder asked for (a run's results
folder) when it can be written, else in ``$SLOGATE_LOG_DIR``, else the system's
temporary folder. Its text is masked like every other output.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import traceback
from pathlib import Path

from slogate.analysis.documents.neutral import neutral_text
from slogate.analysis.documents.summary import redact_text

__all__ = ["crash_line", "write_crash_log"]


def _folders(preferred: Path | None) -> list[Path]:
    folders = [] if preferred is None else [preferred]
    if os.environ.get("SLOGATE_LOG_DIR"):
        folders.append(Path(os.environ["SLOGATE_LOG_DIR"]))
    folders.append(Path(tempfile.gettempdir()))
    return folders


def write_crash_log(error: BaseException, command: str, folder: Path | None = None) -> Path | None:
    """Write ``error``'s traceback; the file's path, or None when no folder took it."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"slogate-error-{stamp}-{os.getpid()}.log"
    for where in _folders(folder):
        path = where / name
        try:
            path.write_text(f"{command}\n\n{redact_text(text)}", encoding="utf-8")
        except OSError:  # a full disk takes the name and refuses the text: no empty log
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            continue
        return path
    return None


def crash_line(error: BaseException, log: Path | None) -> str:
    """One line for stderr: what failed and where the traceback is."""
    first = neutral_text(str(error)).strip().split("\n")[0][:300]
    what = f"{type(error).__name__}: {first}" if first else type(error).__name__
    where = f" (traceback in {log})" if log is not None else ""
    return f"run failed: {redact_text(what)}{where}"
