"""FastAPI's own test suite with MsgspecRouter in place of APIRouter, on both twins.

    python tests/fastapi_suite/run.py [--suite fastapi|upstream] [--fastapi VERSION]
        [--twin both|compiled|pure] [--judge-only] [-- PYTEST_ARGS...]

1. Downloads FastAPI's sdist (its `tests/` and `docs_src/`) for VERSION, by default the
   FastAPI installed beside the interpreter running this script, into `.fastapi-suite/`;
   re-used when present. The sdist's own `fastapi/` package is removed, so the tests
   import the installed one.
2. Makes a venv of its own there (FastAPI and msgspec at this interpreter's versions, what
   the tests import from requirements.txt, and this repository as an editable install
   that uses the compiled module `make` built in `src/`); re-made when any of that changes.
   The tests' extra packages stay out of the development venv.
3. Runs the suite once per twin (one process each: MSGSPEC_FASTAPI_PURE=1 for the pure
   one) with the `msgspec_drop_in` plugin, and compares each test's outcome with
   differences.toml.

Fails (exit 1) on a failure or error that differences.toml does not list, on a listed
test that passes (so the list shrinks as fixes land), and on a test whose outcome differs
between the twins. Prints passed, failed and listed per twin, and each run's time.
PYTEST_ARGS go to both runs: `-- --tb=short tests/test_x.py` shows one file's tracebacks.
`--judge-only` judges the last run's outcomes again, after the list was edited.

`--suite upstream` runs upstream msgspec-fastapi 0.0.4's own tests (from its sdist, without
its package) the same way, against upstream_differences.toml, without the plugin: they
use MsgspecRouter themselves.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIREMENTS = HERE / "requirements.txt"
FAILING = ("failed", "error")


def run(*command: str | Path, **kwargs: object) -> None:
    subprocess.run([str(part) for part in command], check=True, **kwargs)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Suite:
    """A test suite that comes in a package's sdist, and how to run it against ours."""

    project: str
    package_dir: str  # the sdist's own copy of the package, removed: the tests import ours
    plugins: tuple[str, ...]
    differences: Path


SUITES = {
    "fastapi": Suite("fastapi", "fastapi", ("msgspec_drop_in",), HERE / "differences.toml"),
    "upstream": Suite("msgspec-fastapi", "src", (), HERE / "upstream_differences.toml"),
}
UPSTREAM_VERSION = "0.0.4"


def sdist_tree(cache: Path, suite: Suite, version: str) -> Path:
    """The unpacked sdist of suite.project==version, without its own package."""
    tree = cache / f"{suite.project}-{version}"
    if (tree / "tests").is_dir():
        return tree
    downloads = cache / "downloads" / f"{suite.project}-{version}"
    if not any(downloads.glob("*.tar.gz")):
        run(
            sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:",
            "--no-deps", "--dest", downloads, f"{suite.project}=={version}",
        )  # fmt: skip
    (archive,) = downloads.glob("*.tar.gz")
    unpacking = cache / f"{tree.name}.unpacking"
    shutil.rmtree(unpacking, ignore_errors=True)
    with tarfile.open(archive) as sdist:
        sdist.extractall(unpacking, filter="data")
    (top,) = unpacking.iterdir()
    if not (top / "tests").is_dir():
        raise SystemExit(f"{archive.name} has no tests/")
    shutil.rmtree(top / suite.package_dir)
    top.rename(tree)
    unpacking.rmdir()
    return tree


def suite_venv(cache: Path, fastapi_version: str) -> Path:
    """The suite's venv's python, made (again) when what goes into it changed."""
    msgspec_version = importlib.metadata.version("msgspec")
    pins = [f"fastapi=={fastapi_version}", f"msgspec=={msgspec_version}"]
    with (REPO / "pyproject.toml").open("rb") as file:
        ours = tomllib.load(file)["project"]["dependencies"]
    stamp_text = "\n".join([*pins, *ours, REQUIREMENTS.read_text()])
    stamp_digest = hashlib.sha256(stamp_text.encode()).hexdigest()
    venv = cache / f"venv-fastapi-{fastapi_version}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists() and stamp.read_text() == stamp_digest:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    run(sys.executable, "-m", "venv", venv)
    run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
    run(python, "-m", "pip", "install", "-q", "setuptools>=77", *pins, "-r", REQUIREMENTS)
    # Editable and not compiled again: the compiled twin is the one `make` built in src/.
    run(
        python, "-m", "pip", "install", "-q", "--no-build-isolation", "-e", REPO, *pins,
        env={**os.environ, "MSGSPEC_FASTAPI_NO_EXTENSIONS": "1"},
    )  # fmt: skip
    stamp.write_text(stamp_digest)
    return python


KINDS = ("deliberate", "documented", "bug")


@dataclass
class Differences:
    """A differences file: listed node ids, and messages that cover a failure anywhere.

    A group's `messages` are for a failure that surfaces in whichever test happens to run
    when it does (an unawaited coroutine reported when the garbage collector finds it):
    a failure whose message contains one of them is covered whatever its node id.
    """

    path: Path
    tests: dict[str, str] = field(default_factory=dict)  # node id -> kind
    messages: dict[str, str] = field(default_factory=dict)  # message part -> kind

    def kind_of(self, key: str, outcome: dict[str, str]) -> str | None:
        """The kind a failing test is listed with, or None."""
        if key in self.tests:
            return self.tests[key]
        message = outcome.get("message", "")
        return next((kind for part, kind in self.messages.items() if part in message), None)


def load_differences(path: Path) -> Differences:
    differences = Differences(path)
    with path.open("rb") as file:
        groups = tomllib.load(file).get("difference", [])
    for group in groups:
        if group["kind"] not in KINDS:
            raise SystemExit(f"{path.name}: kind {group['kind']!r} is not one of {KINDS}")
        for test in group.get("tests", []):
            if test in differences.tests:
                raise SystemExit(f"{path.name}: {test} is listed twice")
            differences.tests[test] = group["kind"]
        for message in group.get("messages", []):
            differences.messages[message] = group["kind"]
    return differences


def run_twin(
    python: Path, tree: Path, suite: Suite, twin: str, pytest_args: list[str], rerun: bool
) -> tuple[dict[str, dict[str, str]], float]:
    outcomes_file = tree.parent / f"outcomes-{tree.name}-{twin}.json"
    if not rerun:
        return json.loads(outcomes_file.read_text()), 0.0
    outcomes_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "MSGSPEC_FASTAPI_EXPECT": twin,
        "MSGSPEC_FASTAPI_PURE": "1" if twin == "pure" else "0",
    }
    command = [
        str(python), "-m", "pytest", "-q", "-rN", "--tb=no", "-p", "no:cacheprovider",
        "-p", "outcomes", f"--outcomes={outcomes_file}", "--continue-on-collection-errors",
        *(arg for plugin in suite.plugins for arg in ("-p", plugin)),
        *(pytest_args or ["tests"]),
    ]  # fmt: skip
    print(f"\n== {twin} twin: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    # Its exit status is pytest's verdict without the list; the verdict is ours, below.
    subprocess.run(command, cwd=tree, env=env, check=False)
    elapsed = time.monotonic() - started
    if not outcomes_file.exists():
        raise SystemExit(f"the {twin} run wrote no outcomes (see its output above)")
    return json.loads(outcomes_file.read_text()), elapsed


def outcomes_of(entry: str, outcomes: dict[str, dict[str, str]]) -> list[str]:
    """A listed entry's outcomes: its own, or its tests' where a module entry collected."""
    if entry in outcomes:
        return [outcomes[entry]["outcome"]]
    return [value["outcome"] for key, value in outcomes.items() if key.startswith(entry + "::")]


def judge(twin: str, outcomes: dict[str, dict[str, str]], differences: Differences) -> list[str]:
    """Print the twin's numbers; the problems that fail the run."""
    problems = []
    counts: dict[str, int] = {}
    for value in outcomes.values():
        counts[value["outcome"]] = counts.get(value["outcome"], 0) + 1
    failing = {key for key, value in outcomes.items() if value["outcome"] in FAILING}
    kinds = {key: differences.kind_of(key, outcomes[key]) for key in failing}
    for key in sorted(key for key, kind in kinds.items() if kind is None):
        outcome = outcomes[key]
        problems.append(f"{twin}: not listed: {outcome['outcome']} {key}: {outcome['message']}")
    not_run = []
    for entry in sorted(differences.tests.keys() - failing):
        results = outcomes_of(entry, outcomes)
        if not results or all(result == "skipped" for result in results):
            not_run.append(entry)
        elif not any(result in FAILING for result in results):
            problems.append(f"{twin}: listed but passes now (take it off the list): {entry}")
    listed = [kind for kind in kinds.values() if kind is not None]
    by_kind = ", ".join(f"{listed.count(kind)} {kind}" for kind in KINDS)
    print(
        f"{twin}: {counts.get('passed', 0)} passed, {len(failing)} failed or errors "
        f"({len(listed)} listed: {by_kind}; {len(failing) - len(listed)} not listed), "
        f"{counts.get('skipped', 0)} skipped, {counts.get('xfailed', 0)} xfailed; "
        f"{len(differences.tests)} listed in {differences.path.name}, "
        f"{len(not_run)} of them not run here"
    )
    return problems


def twins_differ(
    compiled: dict[str, dict[str, str]], pure: dict[str, dict[str, str]], differences: Differences
) -> list[str]:
    """Tests whose outcome differs between the twins, but for a failure a message covers."""
    problems = []
    for key in sorted(compiled.keys() | pure.keys()):
        sides = [side.get(key, {"outcome": "not run"}) for side in (compiled, pure)]
        if sides[0]["outcome"] == sides[1]["outcome"]:
            continue
        if any(
            side["outcome"] in FAILING
            and key not in differences.tests
            and differences.kind_of(key, side) is not None
            for side in sides
        ):
            continue
        problems.append(
            f"twins differ: {key}: compiled {sides[0]['outcome']}, pure {sides[1]['outcome']}"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="fastapi")
    parser.add_argument("--fastapi", help="FastAPI version (default: the one installed here)")
    parser.add_argument("--twin", choices=["both", "compiled", "pure"], default="both")
    parser.add_argument("--cache", type=Path, default=REPO / ".fastapi-suite")
    parser.add_argument(
        "--judge-only",
        action="store_true",
        help="judge the outcomes of the last run again (after editing the list)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: passed on to pytest")
    args = parser.parse_args()
    suite = SUITES[args.suite]
    fastapi_version = args.fastapi or importlib.metadata.version("fastapi")
    version = fastapi_version if args.suite == "fastapi" else UPSTREAM_VERSION
    cache = args.cache.resolve()
    cache.mkdir(exist_ok=True)
    tree = sdist_tree(cache, suite, version)
    python = suite_venv(cache, fastapi_version)
    differences = load_differences(suite.differences)
    twins = ["compiled", "pure"] if args.twin == "both" else [args.twin]
    results = {
        twin: run_twin(python, tree, suite, twin, args.pytest_args, not args.judge_only)
        for twin in twins
    }

    print(f"\n== {tree.name}'s suite at FastAPI {fastapi_version}, against msgspec-fastapi here")
    problems = []
    for twin, (outcomes, elapsed) in results.items():
        problems += judge(twin, outcomes, differences)
        if not args.judge_only:
            print(f"{twin}: ran in {elapsed:.0f} s")
    if len(results) == 2:
        (compiled, _), (pure, _) = results.values()
        problems += twins_differ(compiled, pure, differences)
    for problem in problems:
        print(problem)
    print("FAILED" if problems else "OK: every failure is a listed difference")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
