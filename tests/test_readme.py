"""The README says what the docs say, and stays short.

Its usage example is the docs' example file, which tests/test_docs_examples.py runs on
both twins (and `make wheel-test` runs the README's own copy against the installed wheel,
after installing it with the README's install line: .ci/readme.py). Its install commands
are Getting started's.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def load_readme_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_readme", ROOT / ".ci" / "readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme = load_readme_script()


def test_the_readmes_usage_example_is_the_docs_example() -> None:
    example = (ROOT / "docs_src" / "getting_started" / "usage.py").read_text(encoding="utf-8")
    assert readme.usage_example(README) == example


def test_the_readme_and_getting_started_give_the_same_install_commands() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    ours, theirs = (readme.blocks(text, "Install", "sh") for text in (README, page))
    assert ours == theirs
    assert readme.wheel_install(README) == "pip install wheelhouse/msgspec_fastapi-*.whl"


def test_the_readme_installs_nothing_from_pypi_by_the_upstream_name() -> None:
    for block in readme.blocks(README, "Install", "sh"):
        assert "pip install msgspec-fastapi" not in block


def test_the_readme_is_at_most_150_lines() -> None:
    assert len(README.splitlines()) <= 150


def test_the_readme_keeps_the_two_commands_for_a_fresh_machine() -> None:
    (block,) = readme.blocks(README, "Two commands for a fresh machine", "sh")
    assert readme.commands(block) == ["make bench", "make test"]


def test_every_file_the_readme_links_exists() -> None:
    if not (ROOT / "setup.py").exists():
        pytest.skip("not the source tree: the installed package's tests copy only some files")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [target for target in targets if "://" not in target]
    assert local, "no local link found"
    assert [target for target in local if not (ROOT / target).exists()] == []
