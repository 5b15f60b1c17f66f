"""The layout of the package, as docs/development.md shows it and as the build needs it.

The layout table names every module of the package, and only those: each source file
(by its path below the package) stands in the table's module column, and each file named
there exists. A one-source compiled module (`name_py.py` with `name.pxd`) is built by
setup.py, and the repository tracks no symbolic link (a checkout made without links, as
git makes one on Windows, must build)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import msgspec_fastapi

# src/ in a checkout, site-packages for an installed wheel or sdist.
SOURCE = Path(msgspec_fastapi.__file__).resolve().parent
REPOSITORY = Path(__file__).resolve().parent.parent
DEVELOPMENT = REPOSITORY / "docs" / "development.md"
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")
_FILE_NAME = re.compile(r"`([\w/]+\.(?:py|pyx|pxd))`")


def layout_rows(page: str) -> list[list[str]]:
    """The cells of each row of the table under `## Layout`, header rows left out."""
    section = page.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def documented_files(page: str) -> set[str]:
    """The file names in the table's module column."""
    return {name for row in layout_rows(page) for name in _FILE_NAME.findall(row[1])}


def source_files() -> set[str]:
    """Each source file's path below the package, as the table writes it."""
    return {
        path.relative_to(SOURCE).as_posix()
        for path in SOURCE.rglob("*")
        if path.suffix in SOURCE_SUFFIXES
    }


def test_the_table_is_read_from_the_module_column() -> None:
    page = (
        "intro\n## Layout\n\ntext\n\n| lifecycle | module | job |\n| --- | --- | --- |\n"
        "| per request | `_a.py`, `_p/b.pxd` (`f`) | reads `_c.py` |\n\n## Tests\n| x | `_d.py` |\n"
    )
    assert documented_files(page) == {"_a.py", "_p/b.pxd"}


def test_every_module_of_the_package_is_in_the_layout_table() -> None:
    missing = source_files() - documented_files(DEVELOPMENT.read_text(encoding="utf-8"))
    assert not missing, f"not in the layout table of docs/development.md: {sorted(missing)}"


def test_every_module_in_the_layout_table_exists() -> None:
    # An installed wheel may hold a module compiled only, without its source.
    present = {path.relative_to(SOURCE).as_posix().split(".")[0] for path in SOURCE.rglob("*")}
    documented = documented_files(DEVELOPMENT.read_text(encoding="utf-8"))
    stale = {name for name in documented if name.split(".")[0] not in present}
    assert not stale, f"in the layout table but not in the package: {sorted(stale)}"


def test_every_one_source_module_is_built_from_its_python_source() -> None:
    setup = REPOSITORY / "setup.py"
    if not setup.is_file():
        pytest.skip("setup.py is not beside the tests (an installed package)")
    built = re.search(r"ONE_SOURCE = \(([^)]*)\)", setup.read_text(encoding="utf-8"))
    assert built is not None
    names = set(re.findall(r'"([\w.]+)"', built.group(1)))
    source = REPOSITORY / "src" / "msgspec_fastapi"
    declared = {
        path.relative_to(source).with_suffix("").as_posix().replace("/", ".")
        for path in source.rglob("*.pxd")
    }
    assert names == declared
    for name in names:
        assert (source / (name.replace(".", "/") + "_py.py")).is_file(), name


def test_the_repository_tracks_no_symbolic_link() -> None:
    git = shutil.which("git")
    if git is None or not (REPOSITORY / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        [git, "ls-files", "-s"], cwd=REPOSITORY, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000")]
    assert not links
