"""Which request path is loaded: the compiled module or its pure-Python twin."""

import importlib.util
import os
import subprocess
import sys

import pytest

import msgspec_fastapi
from msgspec_fastapi import _impl

MODULES = {"compiled": "msgspec_fastapi._fastpath", "pure": "msgspec_fastapi._fastpath_py"}


def implementation_in_subprocess(**environment: str) -> str:
    env = {**os.environ, **environment}
    env.pop("MSGSPEC_FASTAPI_EXPECT", None)
    result = subprocess.run(
        [sys.executable, "-c", "import msgspec_fastapi; print(msgspec_fastapi.IMPLEMENTATION)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_implementation_is_compiled_or_pure() -> None:
    assert msgspec_fastapi.IMPLEMENTATION in ("compiled", "pure")


def test_request_path_comes_from_the_module_the_implementation_names() -> None:
    assert _impl.twin.__name__ == MODULES[msgspec_fastapi.IMPLEMENTATION]


def test_pure_environment_variable_selects_the_pure_twin() -> None:
    assert implementation_in_subprocess(MSGSPEC_FASTAPI_PURE="1") == "pure"


@pytest.mark.skipif(
    importlib.util.find_spec("msgspec_fastapi._fastpath") is None,
    reason="the compiled module is not built in this environment",
)
def test_compiled_module_is_used_when_it_is_built() -> None:
    environment = {"MSGSPEC_FASTAPI_PURE": "0"}

    assert implementation_in_subprocess(**environment) == "compiled"
