"""What the micro benchmark (bench/micro/) and the service benchmark (bench/service/) share.

Upstream msgspec-fastapi 0.0.4 has the same import name as this package, so it lives in a
pip --target folder of its own (UPSTREAM_DIR) that a worker puts first on sys.path.
import_router_package() imports the `msgspec_fastapi` a variant stands for and checks that
it is that one, so that no variant is ever measured with another variant's code.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
PEERS = BENCH / ".peers"
UPSTREAM_DIST = "msgspec-fastapi"
UPSTREAM_VERSION = "0.0.4"
UPSTREAM_DIR = PEERS / f"{UPSTREAM_DIST}-{UPSTREAM_VERSION}"
# The variants that run on a `msgspec_fastapi` package: ours twice, and upstream.
ROUTER_VARIANTS = ("compiled", "pure", "upstream")
PURE_ENV = "MSGSPEC_FASTAPI_PURE"


class VariantError(Exception):
    """The variant cannot be measured as asked; the message says why."""


class Unavailable(VariantError):
    """The variant's package is not there (a skip, not a failure, unless asked to be)."""


class WrongPackage(VariantError):
    """The import found another package than the variant stands for."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def version(dist: str, path: list[str] | None = None) -> str | None:
    """The installed version of `dist` (searched in `path` only, if given), or None."""
    if path is None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None
    return next((found.version for found in metadata.distributions(name=dist, path=path)), None)


def versions(dists: tuple[str, ...] | list[str]) -> dict[str, str | None]:
    return {dist: version(dist) for dist in dists}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_record(versions: dict[str, Any]) -> dict[str, Any]:
    """What a --json result says about its run: when, at which commit, on what, with which
    command. The docs' benchmark page shows it beside the figures."""
    described = subprocess.run(
        ["git", "-C", str(BENCH), "describe", "--always", "--dirty", "--abbrev=7"],
        capture_output=True,
        text=True,
        check=False,
    )
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(BENCH.parent):
        script = script.relative_to(BENCH.parent)
    now = datetime.now(UTC)
    return {
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M UTC"),
        "commit": described.stdout.strip() or "unknown",
        "command": shlex.join(["python", str(script), *sys.argv[1:]]),
        "machine": f"{cpu_model()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "versions": {name: found for name, found in versions.items() if found},
    }


def load_text(loads: tuple[tuple[float, ...], tuple[float, ...]]) -> str:
    """A run's load, for its record: the 1-minute load average (/proc/loadavg) before and
    after it."""
    before, after = loads
    return f"{before[0]:.2f} before, {after[0]:.2f} after (1-minute load average)"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """As many distinct free ports: every probe socket stays bound until all are chosen, as
    the kernel may hand a port it just released out again. Granian binds with SO_REUSEPORT,
    so two servers given one port would both start and share the requests."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _upstream_installed(directory: Path) -> bool:
    return (directory / "msgspec_fastapi" / "__init__.py").is_file() and version(
        UPSTREAM_DIST, [str(directory)]
    ) == UPSTREAM_VERSION


def ensure_upstream(directory: Path = UPSTREAM_DIR) -> str | None:
    """Install upstream 0.0.4 into `directory` unless it is there; a reason to skip, or None."""
    if _upstream_installed(directory):
        return None
    # A partial or other-version install would make pip refuse or mix files; start clean.
    shutil.rmtree(directory, ignore_errors=True)
    spec = f"{UPSTREAM_DIST}=={UPSTREAM_VERSION}"
    log(f"installing {spec} into {directory}")
    # --no-deps: upstream must run on the same FastAPI and msgspec as every other variant.
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--target", str(directory), spec]
    result = subprocess.run(command, stdout=sys.stderr, check=False)
    if result.returncode != 0 or not _upstream_installed(directory):
        shutil.rmtree(directory, ignore_errors=True)
        return f"pip could not install {spec} (exit {result.returncode})"
    return None


def _is_under(file: str | None, folder: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(folder.resolve())


def import_router_package(
    variant: str, upstream_dir: Path = UPSTREAM_DIR, ours_path: Path | None = None
) -> tuple[ModuleType, dict[str, Any]]:
    """Import the `msgspec_fastapi` that `variant` stands for, checked; with facts about it.

    Call it before anything imports msgspec_fastapi: sys.path and MSGSPEC_FASTAPI_PURE
    decide which package and which twin the import finds.
    """
    if variant not in ROUTER_VARIANTS:
        raise ValueError(f"{variant!r} does not run on msgspec_fastapi")
    if "msgspec_fastapi" in sys.modules:
        raise WrongPackage("msgspec_fastapi was imported before the variant was set up")
    if variant == "upstream":
        if not _upstream_installed(upstream_dir):
            raise Unavailable(f"msgspec-fastapi {UPSTREAM_VERSION} is not in {upstream_dir}")
        # First on sys.path, so it wins over the msgspec_fastapi of the environment.
        sys.path.insert(0, str(upstream_dir))
    elif ours_path is not None:
        sys.path.insert(0, str(ours_path))
    if variant == "pure":
        os.environ[PURE_ENV] = "1"
    else:
        os.environ.pop(PURE_ENV, None)
    try:
        module = importlib.import_module("msgspec_fastapi")
    except ImportError as error:
        raise Unavailable(f"msgspec_fastapi does not import: {error}") from error
    file = getattr(module, "__file__", None)
    implementation = getattr(module, "IMPLEMENTATION", None)
    if variant == "upstream":
        if not _is_under(file, upstream_dir):
            raise WrongPackage(f"msgspec_fastapi was imported from {file}, not {upstream_dir}")
        if implementation is not None:
            raise WrongPackage(f"{file} has IMPLEMENTATION, so it is not upstream")
        found = version(UPSTREAM_DIST, [str(upstream_dir)])
    else:
        if _is_under(file, upstream_dir):
            raise WrongPackage(f"msgspec_fastapi was imported from the upstream folder ({file})")
        if implementation is None:
            raise Unavailable(f"msgspec_fastapi at {file} has no IMPLEMENTATION: not this fork")
        if implementation != variant:
            raise WrongPackage(
                f"msgspec_fastapi.IMPLEMENTATION is {implementation!r}, expected {variant!r}"
                + (" (the compiled module did not load)" if variant == "compiled" else "")
            )
        found = getattr(module, "__version__", None) or version(UPSTREAM_DIST)
    info = {"file": file, "implementation": implementation, "version": found}
    return module, info


def route_index_installer(package: Any) -> Callable[[Any], None] | None:
    """`install_dispatch` of an imported `msgspec_fastapi`, where it has one.

    Ours has it; upstream 0.0.4 never does (it lacks IMPLEMENTATION, this fork's mark).
    """
    if not hasattr(package, "IMPLEMENTATION"):
        return None
    return getattr(package, "install_dispatch", None)
