"""Which variants can run here: upstream installed apart, ours importable, and versions."""

from __future__ import annotations

import contextlib
import json
import operator
import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from common import UPSTREAM_VERSION, ensure_upstream
from harness import Settings, serve_command


def probe(settings: Settings, variant: str) -> dict[str, Any]:
    """Import the variant in a child process; its versions, or why it is unavailable."""
    if variant == "upstream":
        problem = ensure_upstream(settings.upstream_dir)
        if problem:
            return {"variant": variant, "available": False, "reason": problem}
    result = subprocess.run(
        [*serve_command(settings, variant), "--probe"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if lines:
        with contextlib.suppress(json.JSONDecodeError):
            info: dict[str, Any] = json.loads(lines[-1])
            return info
    error = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return {"variant": variant, "available": False, "reason": f"import failed: {error}"}


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets a plain specifier such as ``<0.148,>=0.142.2``."""
    checks = {
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
        "==": operator.eq,
        "!=": operator.ne,
    }
    for clause in specifier.split(","):
        match = re.fullmatch(r"\s*(<=|>=|==|!=|<|>)\s*([\d.]+)\s*", clause)
        if match and not checks[match[1]](_version_key(version), _version_key(match[2])):
            return False
    return True


def check_upstream_range(info: dict[str, Any], directory: Path) -> str | None:
    """A warning when FastAPI is outside the range that upstream declares."""
    fastapi = info.get("packages", {}).get("fastapi")
    if not fastapi:
        return None
    for dist in metadata.distributions(name="msgspec-fastapi", path=[str(directory)]):
        for requirement in dist.requires or []:
            match = re.fullmatch(r"fastapi\s*\(?([^;)]*)\)?(;.*)?", requirement.strip())
            if match and not _satisfies(fastapi, match[1]):
                return (
                    f"FastAPI {fastapi} is outside msgspec-fastapi {UPSTREAM_VERSION}'s"
                    f" declared range ({match[1].strip()})"
                )
    return None
