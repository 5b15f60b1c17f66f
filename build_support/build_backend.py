"""The package's build backend: setuptools', which also asks for the package's own
dependencies when the build is profile-guided (MSGSPEC_FASTAPI_PGO=1), since its training
run (`train.py`) serves a FastAPI application with the modules just built."""

from __future__ import annotations

import os
import tomllib
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import (
    build_editable,
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


def training_requirements() -> list[str]:
    """The package's dependencies where the build trains, else none."""
    if os.environ.get("MSGSPEC_FASTAPI_PGO") != "1":
        return []
    with open("pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["project"]["dependencies"])


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*build_meta.get_requires_for_build_wheel(config_settings), *training_requirements()]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [
        *build_meta.get_requires_for_build_editable(config_settings),
        *training_requirements(),
    ]
