"""docs/design.md's rooms and module map, and README's layout, match the tree.

A newcomer finds where a change belongs from the map; a map that names a
module that is gone, or leaves out one that exists, sends them searching.
(``python tools/module_map.py`` prints the section afresh.)"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_ROOMS = {"tests", "bench", "tools", "build", "deploy", "docs"}


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def tree_modules() -> set[str]:
    """Every module of every package outside the tests, benches and tools."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in ROOT.glob("**/*.py")
        if (path.parent / "__init__.py").exists()
        and path.relative_to(ROOT).parts[0] not in NOT_ROOMS
        and not path.relative_to(ROOT).parts[0].startswith(".")
    }


def map_entries() -> list[str]:
    """``room/sub/module.py`` for each line of the map, in its order."""
    entries, package = [], None
    for line in section((ROOT / "docs/design.md").read_text(), "Module map").splitlines():
        heading = re.fullmatch(r"### `([\w/]+)/`", line)
        if heading:
            package = heading.group(1)
        item = re.match(r"- `([\w.]+\.py)`", line)
        if item:
            assert package is not None, f"{line!r} comes before any room's heading"
            entries.append(f"{package}/{item.group(1)}")
    return entries


def table_rooms(text: str) -> set[str]:
    return set(re.findall(r"^\| `(\w+)/` \|", text, flags=re.MULTILINE))


def top_rooms() -> set[str]:
    return {module.split("/")[0] for module in tree_modules()}


def test_the_module_map_lists_every_module_once_and_nothing_else() -> None:
    entries = map_entries()
    twice = [entry for entry, count in Counter(entries).items() if count > 1]
    assert twice == []
    assert sorted(set(entries) - tree_modules()) == [], "named in the map, missing in the tree"
    assert sorted(tree_modules() - set(entries)) == [], "in the tree, missing from the map"


def test_the_room_tables_of_design_and_readme_name_every_room_and_only_those() -> None:
    design = (ROOT / "docs/design.md").read_text()
    assert table_rooms(section(design, "Rooms")) == top_rooms()
    assert table_rooms(section((ROOT / "README.md").read_text(), "Layout")) == top_rooms()


def test_modules_share_a_file_name_only_where_the_map_says_they_are_parallel() -> None:
    names = Counter(Path(module).name for module in tree_modules())
    shared = {name for name, count in names.items() if count > 1} - {"__init__.py"}
    parallel = section((ROOT / "docs/design.md").read_text(), "Module map")
    said = parallel[parallel.index("Parallel by design") :].split("\n\n")[0]
    assert sorted(name for name in shared if f"`{name}`" not in said) == []
