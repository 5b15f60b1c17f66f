"""What compiler options do for the compiled twin: instructions and first-level cache misses
per request on causes.py's routes, for the build setup.py makes and for variations of it.

Each build is made by setup.py from a copy of the sources in a folder of its own
(`build_ext --inplace`, the extensions required), with the build's flags appended to the
interpreter's own through CFLAGS and LDFLAGS (the last -O wins) and its Cython directives
prepended to each compiled source as `# cython:` lines; then causes.py counts the compiled
twin of that copy, put first on the path. The repository's own build is not touched.

    python bench/causes_build.py                        # every build, every route
    python bench/causes_build.py --builds current,-flto --routes get --requests 50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import causes
from common import BENCH, log, run_record, versions
from tables import table

ROOT = BENCH.parent
PACKAGE = Path("src") / "msgspec_fastapi"
# What setup.py compiles: the .pyx, and each one-source module's `name_py.py`.
COMPILED = ("_fastpath.pyx", "_dependencies/executor_py.py", "_errors/jsonscan_py.py")
COMPILED += ("_routing/dispatch_py.py", "_routing/entry_py.py")
CAUSES = ("instructions", "I1", "D1")


@dataclass(frozen=True)
class Build:
    # Appended to the interpreter's CFLAGS: setuptools takes CFLAGS from the environment
    # in place of the interpreter's, and adds them to the link command too (where -flto
    # needs its -O level again).
    cflags: str = ""
    directives: dict[str, str] = field(default_factory=dict)
    # setup.py's environment variables for the build.
    env: dict[str, str] = field(default_factory=dict)


# No machine-specific flag (-march=native and the like): a wheel runs on any CPU of its tag.
# The interpreter's CFLAGS already hold -O3 where it was built with GCC's default, so
# "current" is the -O3 build there; -O2 shows what the level does.
BUILDS = {
    "current": Build(),
    "-O2": Build(cflags="-O2"),
    "-flto": Build(cflags="-flto"),
    # Smaller code for fewer instruction-cache misses, at the cost of more instructions.
    "-Os": Build(cflags="-Os"),
    # Cython's method-call unpacking inlined at each call site: less code without it.
    "-DCYTHON_UNPACK_METHODS=0": Build(cflags="-DCYTHON_UNPACK_METHODS=0"),
    # GCC's profile-guided optimisation, as setup.py makes it for the published wheels
    # (trained by build_support/train.py).
    "pgo": Build(env={"MSGSPEC_FASTAPI_PGO": "1"}),
    # Cython's traceback function declared cold (GCC): its callers' error paths unlikely.
    "cold-traceback": Build(cflags=f"-include {BENCH / 'cold_traceback.h'}"),
    # One- and no-argument functions called by METH_O/METH_NOARGS: they then refuse their
    # argument by keyword, so not safe to adopt without checking every caller.
    "always_allow_keywords=False": Build(directives={"always_allow_keywords": "False"}),
}
BASE = "current"


def build(name: str, spec: Build, folder: Path) -> Path:
    """Build `spec` in a copy of the sources under `folder`; the copy's src/."""
    for item in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / item, folder / item)
    shutil.copytree(ROOT / "build_support", folder / "build_support")
    shutil.copytree(
        ROOT / "src", folder / "src", ignore=shutil.ignore_patterns("*.so", "*.c", "*.egg-info")
    )
    for source in COMPILED:
        path = folder / PACKAGE / source
        lines = "".join(f"# cython: {key}={value}\n" for key, value in spec.directives.items())
        path.write_text(lines + path.read_text())
    compile_in(folder, name, spec.cflags, spec.env)
    return folder / "src"


def compile_in(folder: Path, name: str, cflags: str, extra: dict[str, str]) -> None:
    # Only the build's own variables steer setup.py (none of the caller's).
    env = {key: value for key, value in os.environ.items() if key != "MSGSPEC_FASTAPI_PGO"}
    env.update(MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS="1", **extra)
    if cflags.strip():
        env["CFLAGS"] = f"{sysconfig.get_config_var('CFLAGS')} {cflags}"
    log(f"building {name} in {folder}")
    command = [sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force"]
    subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)


def text_bytes(src: Path) -> int:
    """The size of the compiled modules' code (.text), the instructions a request can touch."""
    total = 0
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module in src.rglob(f"*{suffix}"):
        found = subprocess.run(["size", "-A", str(module)], capture_output=True, text=True)
        total += sum(
            int(line.split()[1]) for line in found.stdout.splitlines() if line.startswith(".text ")
        )
    return total


def loads_from(src: Path, env: dict[str, str]) -> None:
    """Check that the compiled twin imported with `env` is the one built in `src`."""
    probe = "import msgspec_fastapi._fastpath as f; print(f.__file__)"
    found = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    if not Path(found).is_relative_to(src):
        raise RuntimeError(f"the compiled twin loaded from {found}, not from {src}")


def verdict(found: dict[str, dict[str, dict[str, float]]], name: str) -> bool:
    """Whether `name` has fewer instructions and fewer I1 misses than BASE on every route."""
    return all(
        by_build[name][cause] < by_build[BASE][cause]
        for by_build in found.values()
        for cause in ("instructions", "I1")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", default="current,-O2,-Os,-flto,pgo")
    parser.add_argument("--routes", default=",".join(causes.ROUTES))
    parser.add_argument("--requests", type=int, default=100, help="N: batches of N and 2N")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the table and the figures here")
    args = parser.parse_args()
    names = [name for name in args.builds.split(",") if name]
    routes = [route for route in args.routes.split(",") if route]
    if unknown := sorted(set(names) - set(BUILDS)):
        parser.error(f"unknown builds {unknown}")
    if BASE not in names:
        names.insert(0, BASE)
    found: dict[str, dict[str, dict[str, float]]] = {route: {} for route in routes}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="causes-build-") as tmp:
        for name in names:
            folder = Path(tmp) / str(len(sizes))
            folder.mkdir()
            src = build(name, BUILDS[name], folder)
            sizes[name] = text_bytes(src)
            env = dict(os.environ, PYTHONPATH=str(src))
            loads_from(src, env)
            counted = causes.measure(["compiled"], routes, args.requests, args.jobs, env)
            for route in routes:
                found[route][name] = counted[route]["compiled"]
    title = (
        f"The compiled twin per build, per request (callgrind, batches of {args.requests:,}"
        f" and {2 * args.requests:,}); vs {BASE}: ratio to setup.py's build"
    )
    rows = causes.rows(found, BASE, CAUSES)
    print(title)
    print(table(causes.columns(BASE, CAUSES, "build"), rows, right_from=2))
    print("\ncode size (.text of the compiled modules) and the verdict")
    for name in names:
        pays = "-" if name == BASE else ("pays" if verdict(found, name) else "does not pay")
        print(f"  {name:<30} {sizes[name]:>9,} bytes  {pays}")
    if args.json is not None:
        flags = sysconfig.get_config_var("CFLAGS")
        document: dict[str, Any] = {
            "benchmark": "table",
            "title": title,
            "run": run_record(versions(("fastapi", "starlette", "msgspec", "cython"))),
            "columns": causes.columns(BASE, CAUSES, "build"),
            "rows": rows,
            "meta": {
                "requests": args.requests,
                "cache_model": list(causes.CACHE_MODEL),
                "interpreter_cflags": flags,
                "compiler": sysconfig.get_config_var("CC"),
                "builds": {name: vars(BUILDS[name]) for name in names},
                "text_bytes": sizes,
                "pays_on_every_route": {name: verdict(found, name) for name in names[1:]},
            },
            "per_request": found,
        }
        document["run"]["note"] = (
            f"builds by setup.py with the build's flags after the interpreter's ({flags});"
            " the route's name is the first column, the build the second"
        )
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
