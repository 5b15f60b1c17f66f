"""The layout table of docs/development.md names every module of the package, and only
those: each source file of the package stands in the table's module column, and each
file named there exists."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec_fastapi

# src/ in a checkout, site-packages for an installed wheel or sdist.
SOURCE = Path(msgspec_fastapi.__file__).resolve().parent
DEVELOPMENT = Path(__file__).resolve().parent.parent / "docs" / "development.md"
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")
_FILE_NAME = re.compile(r"`(\w+\.(?:py|pyx|pxd))`")


def layout_rows(page: str) -> list[list[str]]:
    """The cells of each row of the table under `## Layout`, header rows left out."""
    section = page.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def documented_files(page: str) -> set[str]:
    """The file names in the table's module column."""
    return {name for row in layout_rows(page) for name in _FILE_NAME.findall(row[1])}


def source_files() -> set[str]:
    return {path.name for path in SOURCE.iterdir() if path.suffix in SOURCE_SUFFIXES}


def test_the_table_is_read_from_the_module_column() -> None:
    page = (
        "intro\n## Layout\n\ntext\n\n| lifecycle | module | job |\n| --- | --- | --- |\n"
        "| per request | `_a.py`, `_b.pxd` (`f`) | reads `_c.py` |\n\n## Tests\n| x | `_d.py` |\n"
    )
    assert documented_files(page) == {"_a.py", "_b.pxd"}


def test_every_module_of_the_package_is_in_the_layout_table() -> None:
    missing = source_files() - documented_files(DEVELOPMENT.read_text(encoding="utf-8"))
    assert not missing, f"not in the layout table of docs/development.md: {sorted(missing)}"


def test_every_module_in_the_layout_table_exists() -> None:
    # An installed wheel may hold a module compiled only, without its source.
    present = {path.name.split(".")[0] for path in SOURCE.iterdir()}
    documented = documented_files(DEVELOPMENT.read_text(encoding="utf-8"))
    stale = {name for name in documented if name.split(".")[0] not in present}
    assert not stale, f"in the layout table but not in the package: {sorted(stale)}"
