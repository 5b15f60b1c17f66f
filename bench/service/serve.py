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
from pathlib import Path
from typing import Any

# bench/ holds common.py, which the micro benchmark shares.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import ROUTER_VARIANTS, UPSTREAM_DIR, VariantError, import_router_package, versions

HERE = Path(__file__).resolve().parent
VARIANTS = ("pydantic", "upstream", "pure", "compiled", "litestar")


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
    if variant in ROUTER_VARIANTS:
        _, info["msgspec_fastapi"] = import_router_package(variant, upstream_dir, ours_path)
        application = importlib.import_module("app_msgspec")
    else:
        application = importlib.import_module(f"app_{variant}")
    info["packages"] = versions(packages)
    return application.app, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start one variant of the service.")
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--http", choices=("httptools", "h11"), default="httptools")
    parser.add_argument("--upstream-dir", type=Path, default=UPSTREAM_DIR)
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
        except VariantError as error:
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
