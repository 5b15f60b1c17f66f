"""Start one variant of the service under uvicorn, or probe whether it can start.

    python serve.py --variant NAME --port PORT [--http httptools|h11]
    python serve.py --variant NAME --probe

run.py starts this script once per measured run, under ``taskset``. The variant decides
which application module is imported and, for the msgspec-fastapi variants, which
``msgspec_fastapi`` package: upstream from its --target folder put first on sys.path,
ours (pure or compiled) from the environment or from --ours-path.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_UPSTREAM_DIR = REPO / "bench" / ".peers" / "msgspec-fastapi-0.0.4"
UPSTREAM_VERSION = "0.0.4"
VARIANTS = ("pydantic", "upstream", "pure", "compiled", "litestar")
PURE_ENV = "MSGSPEC_FASTAPI_PURE"


class Unavailable(Exception):
    """The variant cannot be measured here; the message says why."""


def _version(name: str, path: list[str] | None = None) -> str | None:
    try:
        if path is None:
            return metadata.version(name)
        for dist in metadata.distributions(name=name, path=path):
            return dist.version
    except metadata.PackageNotFoundError:
        return None
    return None


def _is_under(file: str | None, folder: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(folder.resolve())


def _import_router_package(variant: str, upstream_dir: Path, ours_path: Path | None) -> Any:
    """Import the msgspec_fastapi that ``variant`` stands for and check that it is that one."""
    if "msgspec_fastapi" in sys.modules:
        raise RuntimeError("msgspec_fastapi was imported before the variant was set up")
    if variant == "upstream":
        if not (upstream_dir / "msgspec_fastapi" / "__init__.py").is_file():
            raise Unavailable(f"msgspec-fastapi {UPSTREAM_VERSION} is not in {upstream_dir}")
        sys.path.insert(0, str(upstream_dir))
        os.environ.pop(PURE_ENV, None)
    else:
        if ours_path is not None:
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
    if variant == "upstream":
        if not _is_under(file, upstream_dir):
            raise Unavailable(f"msgspec_fastapi was imported from {file}, not {upstream_dir}")
        found = _version("msgspec-fastapi", [str(upstream_dir)])
        if found != UPSTREAM_VERSION:
            raise Unavailable(f"{upstream_dir} holds msgspec-fastapi {found}")
        return module
    if _is_under(file, upstream_dir):
        raise Unavailable(f"msgspec_fastapi was imported from the upstream folder ({file})")
    implementation = getattr(module, "IMPLEMENTATION", None)
    if implementation is None:
        raise Unavailable(f"msgspec_fastapi at {file} has no IMPLEMENTATION: it is not this fork")
    if implementation != variant:
        raise Unavailable(
            f"msgspec_fastapi.IMPLEMENTATION is {implementation!r}, expected {variant!r}"
            + (" (the compiled module did not load)" if variant == "compiled" else "")
        )
    return module


def load_app(variant: str, upstream_dir: Path, ours_path: Path | None) -> tuple[Any, dict]:
    """Import the application of ``variant``; return it with what was imported."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    sys.path.insert(0, str(HERE))
    info: dict[str, Any] = {
        "variant": variant,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }
    packages = ["sqlalchemy", "aiosqlite", "asyncpg", "uvicorn", "httptools", "msgspec"]
    if variant == "litestar":
        packages.append("litestar")
    else:
        packages += ["fastapi", "starlette", "pydantic"]
    if variant in ("upstream", "pure", "compiled"):
        module = _import_router_package(variant, upstream_dir, ours_path)
        info["msgspec_fastapi"] = {
            "file": module.__file__,
            "implementation": getattr(module, "IMPLEMENTATION", None),
            "version": getattr(module, "__version__", None)
            or (
                _version("msgspec-fastapi", [str(upstream_dir)])
                if variant == "upstream"
                else _version("msgspec-fastapi")
            ),
        }
        application = importlib.import_module("app_msgspec")
    else:
        application = importlib.import_module(f"app_{variant}")
    info["packages"] = {name: _version(name) for name in packages}
    return application.app, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start one variant of the service.")
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--http", choices=("httptools", "h11"), default="httptools")
    parser.add_argument("--upstream-dir", type=Path, default=DEFAULT_UPSTREAM_DIR)
    parser.add_argument("--ours-path", type=Path, default=None)
    parser.add_argument(
        "--probe", action="store_true", help="import the variant, print JSON and exit"
    )
    args = parser.parse_args(argv)
    if args.probe:
        # The engine does not connect before the first query: this file is never opened.
        os.environ.setdefault("BENCH_DB_URL", "sqlite+aiosqlite:////nonexistent/probe.db")
        try:
            _, info = load_app(args.variant, args.upstream_dir, args.ours_path)
        except Unavailable as error:
            print(json.dumps({"variant": args.variant, "available": False, "reason": str(error)}))
            return 3
        print(json.dumps({**info, "available": True}))
        return 0

    app, _ = load_app(args.variant, args.upstream_dir, args.ours_path)
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        http=args.http,
        loop="asyncio",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
