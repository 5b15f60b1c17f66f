"""What the wheel checks need beyond the rest of the suite.

A wheel's compiled request path must be a real extension module that sits inside the
installed package, not a leftover file or a copy found elsewhere on sys.path. `make
wheel-test` and cibuildwheel run the suite against the installed package; the rest of the
checks (the expected request path is the one in use, it serves requests) live in
conftest.py and the other test modules.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from twins import get_twin

import msgspec_fastapi


def test_the_compiled_twin_is_an_extension_module_of_the_package() -> None:
    module = Path(get_twin("compiled").module.__file__)
    assert module.name.endswith(tuple(EXTENSION_SUFFIXES))
    assert module.parent == Path(msgspec_fastapi.__file__).parent
