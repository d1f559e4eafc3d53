"""No metric name is spelled as a string literal outside the catalogue (scenarios/metrics.py).

A name spelled in a second place is a list the catalogue does not reach: the
next metric added, or one renamed, leaves it behind (issue 41: the last new
metric touched 10 source files). Code names a metric through its entry
(``TTFT.key``, ``TTFT.name``) or a list derived from the catalogue.

Read: the rooms that measure, judge and show (the load side and the CLI).
Not read: docstrings and the docs, which name metrics for people; the engines
(``simengine/``, ``exactengine/``, ``engines/``: servers that know nothing of
the load side, whose ``ttft_ms`` is a behaviour to serve, not a measurement);
tests and benches, which spell summary.json's keys as its readers do, so that
a renamed key fails them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from slogate.scenarios.metrics import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("analysis", "client", "locustfiles", "reports", "scenarios", "studies", "slogate")
CATALOGUE_FILE = "scenarios/metrics.py"
# Names that are also other things' words: usage fields of the wire protocols
# (``output_tokens``, ``reasoning_tokens``), stream fields (``reasoning``),
# workload and trace keys (``output_tokens``), counters and scenario keys
# (``session``). The metrics themselves are recorded through their entries.
ALSO_OTHER_WORDS = {"output_tokens", "reasoning", "reasoning_tokens", "answer_tokens", "session"}
SPELLINGS = {
    spelling
    for metric in CATALOGUE
    if metric.name not in ALSO_OTHER_WORDS
    for spelling in (metric.name, metric.key)
}


def docstrings(tree: ast.AST) -> set[int]:
    """The string nodes that are docstrings: text for people, not names for code."""
    found = set()
    for node in ast.walk(tree):
        scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, scopes) and ast.get_docstring(node, clean=False) is not None:
            first = node.body[0]
            assert isinstance(first, ast.Expr)
            found.add(id(first.value))
    return found


def literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each string literal in ``path`` that spells a metric."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in SPELLINGS
            and id(node) not in skip
        ):
            yield node.lineno, node.value


def sources() -> list[Path]:
    return [
        path
        for room in ROOMS
        for path in sorted((ROOT / room).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != CATALOGUE_FILE
    ]


def test_no_metric_name_is_spelled_outside_the_catalogue() -> None:
    files = sources()
    assert len(files) > 100  # the rooms were found
    spelled = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in files
        for line, text in literals(path)
    ]
    assert not spelled, "name these through scenarios/metrics.py:\n" + "\n".join(spelled)


def test_the_check_finds_a_spelled_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""Docstring naming ttft_ms."""\nMETRICS = ("ttft_ms", "itl")\n')
    assert list(literals(planted)) == [(2, "ttft_ms"), (2, "itl")]
