"""Check an installed msgspec-fastapi from outside its source tree.

Run it from a folder that holds copies of `tests/`, `docs/`, `docs_src/` (the docs'
examples, which tests/test_docs_examples.py runs) and `pyproject.toml` and nothing of
`src/`, so that only the installed package can be imported (`make wheel-test` and
cibuildwheel's test step both do so):

    python check_install.py compiled   # a wheel: the suite once compiled (the `twin`
                                       # fixture runs both twins), then the pure_smoke
                                       # tests with MSGSPEC_FASTAPI_PURE=1
    python check_install.py pure       # an install without the extension: the suite once

`--skip-slow` leaves the slow tests out (`make wheel-test` does: `make test` runs them).
`--smoke` runs only the pure_smoke tests: enough to show that an install without the
extension imports and serves on the pure twin, which the full runs cover test by test.

It fails when the package is imported from anywhere but site-packages, when the request
path in use is not the expected one, or when a test run fails (or collects no test).
Extra arguments after `--` go to pytest. Windows, macOS and Linux alike: no shell needed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

PROBE = (
    "import msgspec_fastapi\n"
    "print(msgspec_fastapi.IMPLEMENTATION)\n"
    "print(msgspec_fastapi.__file__)\n"
)


def clean_environment() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("MSGSPEC_FASTAPI_PURE", "MSGSPEC_FASTAPI_EXPECT"):
        env.pop(name, None)
    return env


def probe(env: dict[str, str]) -> tuple[str, Path]:
    """Import the package in a fresh interpreter; return its request path and location."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True
    )
    implementation, location = result.stdout.splitlines()
    return implementation, Path(location)


def expect_implementation(expected: str, env: dict[str, str]) -> None:
    implementation, location = probe(env)
    print(f"check_install: IMPLEMENTATION == {implementation!r}, imported from {location}")
    if location.parent.parent.name != "site-packages":
        sys.exit(f"check_install: {location} is not in site-packages")
    if implementation != expected:
        sys.exit(f"check_install: expected IMPLEMENTATION {expected!r}, got {implementation!r}")


def run_suite(
    expected: str, env: dict[str, str], pytest_args: list[str], marks: str | None
) -> None:
    env = {**env, "MSGSPEC_FASTAPI_EXPECT": expected}
    forced = " with MSGSPEC_FASTAPI_PURE=1" if env.get("MSGSPEC_FASTAPI_PURE") else ""
    which = f"the tests marked {marks!r}" if marks else "the test suite"
    print(f"check_install: {which}, expecting {expected!r}{forced}", flush=True)
    selection = ["-m", marks] if marks else []
    command = [sys.executable, "-m", "pytest", *pytest_args, *selection]
    status = subprocess.run(command, env=env).returncode
    if status != 0:
        sys.exit(f"check_install: pytest exited with {status} expecting {expected!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("expected", choices=["compiled", "pure"])
    parser.add_argument("--skip-slow", action="store_true", help="leave the slow tests out")
    parser.add_argument("--smoke", action="store_true", help="run only the pure_smoke tests")
    # What follows `--` goes to pytest. Split by hand: argparse gives an optional
    # positional list nothing once an option stands between it and the first positional.
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    pytest_args = argv[cut + 1 :] or ["-q", "-p", "no:cacheprovider"]

    if not Path("tests").is_dir() or Path("src").exists():
        sys.exit("check_install: run me from a folder with a copy of tests/ and no src/")

    env = clean_environment()
    expect_implementation(args.expected, env)
    marks = "pure_smoke" if args.smoke else "not slow" if args.skip_slow else None
    run_suite(args.expected, env, pytest_args, marks)
    if args.expected == "compiled":
        pure_env = {**env, "MSGSPEC_FASTAPI_PURE": "1"}
        expect_implementation("pure", pure_env)
        run_suite("pure", pure_env, pytest_args, "pure_smoke")
    print(f"check_install: the installed package passed as {args.expected!r}")


if __name__ == "__main__":
    main()
