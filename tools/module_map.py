"""Print docs/design.md's module map from the tree: every module of every room,
under its room, with the first sentence of its docstring.

    python tools/module_map.py > /tmp/map.md   # then paste it over the section

tests/project/test_module_map.py checks the section's names against the tree both
ways; this tool writes the descriptions, which the test leaves to the reader.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_ROOMS = {"tests", "bench", "tools", "build", "deploy", "docs"}
LONGEST = 140


def rooms(root: Path = ROOT) -> list[Path]:
    """Every package of the tree (a room or a room's subpackage), in path order."""
    found = []
    for init in sorted(root.glob("**/__init__.py")):
        package = init.parent.relative_to(root)
        if package.parts[0] not in NOT_ROOMS and not package.parts[0].startswith("."):
            found.append(package)
    return found


def summary(module: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(module.read_text())) or ""
    text = " ".join(doc.split())
    sentence = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
    if not sentence:
        return "(the package; no code)"
    return sentence if len(sentence) <= LONGEST else sentence[: LONGEST - 3].rstrip() + "..."


def module_map(root: Path = ROOT) -> str:
    lines = []
    for package in rooms(root):
        lines += ["", f"### `{package.as_posix()}/`", ""]
        for module in sorted((root / package).glob("*.py")):
            lines.append(f"- `{module.name}`: {summary(module)}")
    return "\n".join(lines[1:]) + "\n"


if __name__ == "__main__":
    sys.stdout.write(module_map(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
