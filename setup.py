"""Installs the repository's rooms under one namespace, with all their data.

The rooms (analysis, reports, scenarios, ...) stay folders at the top of the
repository, one job each (docs/design.md); installed, they are
``slogate.analysis``, ``slogate.reports``, ... so site-packages gets a single
top-level package. Packages and data files are found, not listed, so a new
folder of templates or traces cannot be left out of the wheel. pyproject.toml
cannot express either, hence this file; everything else is declared there.
"""

import warnings
from pathlib import Path

from setuptools import find_packages, setup

NOT_INSTALLED = ["tests", "tests.*", "bench", "bench.*", "tools", "tools.*", "build", "build.*"]
NOT_DATA = {".py", ".pyc", ".pyo"}


def installed_name(found: str) -> str:
    return found if found.split(".")[0] == "slogate" else f"slogate.{found}"


def data_files(folder: Path) -> list[str]:
    """Files under ``folder`` that are not Python and belong to no subpackage."""
    files = []
    for path in sorted(folder.rglob("*")):
        owner = path.parent
        while owner != folder and not (owner / "__init__.py").exists():
            owner = owner.parent
        if (
            path.is_file()
            and owner == folder
            and path.suffix not in NOT_DATA
            and "__pycache__" not in path.parts
        ):
            files.append(path.relative_to(folder).as_posix())
    return files


# Every editable install warns that same-named folders in the working directory
# may shadow the package. The finder maps only ``slogate`` and ``slogate.*`` and
# the repository's folders import only that way, so the warning says nothing
# here and would be the one line of noise in `make setup`.
warnings.filterwarnings("ignore", message=r"Editable installation\.")

found = find_packages(exclude=NOT_INSTALLED)
rooms = sorted({name.split(".")[0] for name in found} - {"slogate"})
setup(
    packages=[installed_name(name) for name in found],
    package_dir={"slogate": "slogate", **{f"slogate.{room}": room for room in rooms}},
    package_data={installed_name(name): data_files(Path(*name.split("."))) for name in found},
    include_package_data=False,
)
