"""FastAPI's own test suite with MsgspecRouter in place of APIRouter, on both twins.

    python tests/fastapi_suite/run.py [--suite fastapi|upstream] [--fastapi VERSION]
        [--mode plain|dispatch|both] [--errors msgspec|fastapi] [--twin both|compiled|pure]
        [--jobs N] [--judge-only] [-- PYTEST_ARGS...]

1. Downloads FastAPI's sdist (its `tests/` and `docs_src/`) for VERSION, by default the
   FastAPI installed beside the interpreter running this script, into `.fastapi-suite/`;
   re-used when present. The sdist's own `fastapi/` package is removed, so the tests
   import the installed one.
2. Makes a venv of its own there (FastAPI and msgspec at this interpreter's versions, what
   the tests import from requirements.txt, and this repository as an editable install
   that uses the compiled module `make` built in `src/`); re-made when any of that changes.
   The tests' extra packages stay out of the development venv.
3. Runs the suite once per twin (one process each: MSGSPEC_FASTAPI_PURE=1 for the pure
   one) and mode with the `msgspec_drop_in` plugin, and compares each test's outcome with
   differences.toml. `--mode plain` (the default) routes through FastAPI's own loop;
   `--mode dispatch` puts `install_dispatch` on every application the suite calls, and
   judges against dispatch_differences.toml too (what install_dispatch alone changes);
   `--mode both` runs the two. `--errors fastapi` makes `errors="fastapi"` the default of
   every MsgspecRouter the suite builds, and judges against errors_differences.toml in
   place of differences.toml (dispatch_differences.toml still adds to it in dispatch
   mode). `--jobs N` runs N of those processes at once.

Fails (exit 1) on a failure or error that the lists do not have, on a listed test that
passes (so the lists shrink as fixes land), and on a test whose outcome differs between
the twins of one mode. Prints passed, failed and listed per run, and each run's time (wall
and CPU). PYTEST_ARGS go to every run: `-- --tb=short tests/test_x.py` shows one file's
tracebacks. `--judge-only` judges the last runs' outcomes again, after a list was edited.

`--suite upstream` runs upstream msgspec-fastapi 0.0.4's own tests (from its sdist, without
its package) the same way, against upstream_differences.toml, without the plugin: they
use MsgspecRouter themselves (plain mode only).
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIREMENTS = HERE / "requirements.txt"
FAILING = ("failed", "error")


def check_call(*command: str | Path, **kwargs: object) -> None:
    subprocess.run([str(part) for part in command], check=True, **kwargs)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Suite:
    """A test suite that comes in a package's sdist, and how to run it against ours."""

    project: str
    package_dir: str  # the sdist's own copy of the package, removed: the tests import ours
    plugins: tuple[str, ...]
    differences: Path
    dispatch_differences: Path | None = None  # what install_dispatch adds (dispatch mode)
    errors_differences: Path | None = None  # in place of `differences` with errors="fastapi"


SUITES = {
    "fastapi": Suite(
        "fastapi",
        "fastapi",
        ("msgspec_drop_in",),
        HERE / "differences.toml",
        HERE / "dispatch_differences.toml",
        HERE / "errors_differences.toml",
    ),
    "upstream": Suite("msgspec-fastapi", "src", (), HERE / "upstream_differences.toml"),
}
MODES = ("plain", "dispatch")
UPSTREAM_VERSION = "0.0.4"


def sdist_tree(cache: Path, suite: Suite, version: str) -> Path:
    """The unpacked sdist of suite.project==version, without its own package."""
    tree = cache / f"{suite.project}-{version}"
    if (tree / "tests").is_dir():
        return tree
    downloads = cache / "downloads" / f"{suite.project}-{version}"
    if not any(downloads.glob("*.tar.gz")):
        check_call(
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
    check_call(sys.executable, "-m", "venv", venv)
    check_call(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
    check_call(python, "-m", "pip", "install", "-q", "setuptools>=77", *pins, "-r", REQUIREMENTS)
    # Editable and not compiled again: the compiled twin is the one `make` built in src/.
    check_call(
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

    name: str
    tests: dict[str, str] = field(default_factory=dict)  # node id -> kind
    messages: dict[str, str] = field(default_factory=dict)  # message part -> kind

    def kind_of(self, key: str, outcome: dict[str, str]) -> str | None:
        """The kind a failing test is listed with, or None."""
        if key in self.tests:
            return self.tests[key]
        message = outcome.get("message", "")
        return next((kind for part, kind in self.messages.items() if part in message), None)


def load_differences(*paths: Path) -> Differences:
    """The differences the files list, together (a test listed twice is an error)."""
    differences = Differences(" + ".join(path.name for path in paths))
    for path in paths:
        with path.open("rb") as file:
            groups = tomllib.load(file).get("difference", [])
        for group in groups:
            if group["kind"] not in KINDS:
                raise SystemExit(f"{path.name}: kind {group['kind']!r} is not one of {KINDS}")
            for test in group.get("tests", []):
                if test in differences.tests:
                    raise SystemExit(f"{differences.name}: {test} is listed twice")
                differences.tests[test] = group["kind"]
            for message in group.get("messages", []):
                differences.messages[message] = group["kind"]
    return differences


@dataclass
class Run:
    """One pytest process: a twin in a mode, with an error vocabulary, and what it left."""

    mode: str
    twin: str
    errors: str
    outcomes_file: Path
    log: Path | None  # its output, when it runs beside others; else the terminal
    wall: float = 0.0
    cpu: float = 0.0

    @property
    def name(self) -> str:
        settings = [mode for mode in (self.mode,) if mode != "plain"]
        settings += [f"errors={self.errors}"] if self.errors != "msgspec" else []
        return f"{self.twin} ({', '.join(settings)})" if settings else self.twin


def plan_runs(
    cache: Path, tree: Path, modes: list[str], twins: list[str], errors: str, jobs: int
) -> list[Run]:
    runs = []
    for mode in modes:
        for twin in twins:
            stem = f"{tree.name}-{twin}" + ("" if mode == "plain" else f"-{mode}")
            stem += "" if errors == "msgspec" else f"-errors-{errors}"
            log = cache / f"log-{stem}.txt" if jobs > 1 else None
            runs.append(Run(mode, twin, errors, cache / f"outcomes-{stem}.json", log))
    return runs


def run_pytest(python: Path, tree: Path, suite: Suite, run: Run, pytest_args: list[str]) -> None:
    """Run the suite for one twin and mode; its outcomes are in `run.outcomes_file`."""
    run.outcomes_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "MSGSPEC_FASTAPI_EXPECT": run.twin,
        "MSGSPEC_FASTAPI_PURE": "1" if run.twin == "pure" else "0",
    }
    command = [
        str(python), "-m", "pytest", "-q", "-rN", "--tb=no", "-p", "no:cacheprovider",
        "-p", "outcomes", f"--outcomes={run.outcomes_file}", "--continue-on-collection-errors",
        *(arg for plugin in suite.plugins for arg in ("-p", plugin)),
        *(["--msgspec-dispatch"] if run.mode == "dispatch" else []),
        *([f"--msgspec-errors={run.errors}"] if run.errors != "msgspec" else []),
        *(pytest_args or ["tests"]),
    ]  # fmt: skip
    where = f" (output in {run.log})" if run.log else ""
    print(f"\n== {run.name}: {' '.join(command[1:])}{where}", flush=True)
    started = time.monotonic()
    # Its exit status is pytest's verdict without the lists; the verdict is ours, below.
    if run.log is None:
        process = subprocess.Popen(command, cwd=tree, env=env)
    else:
        with run.log.open("w") as log:
            process = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=log)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped by wait4 (for its CPU time): Popen must not wait again
    run.wall = time.monotonic() - started
    run.cpu = usage.ru_utime + usage.ru_stime
    if run.log is not None:
        # Its last lines: pytest's counts and the plugin's summary.
        lines = run.log.read_text(errors="replace").splitlines()
        tail = [line for line in lines if line.strip()][-2:]
        print(f"== {run.name} done:", *tail, sep="\n  ", flush=True)
    if not run.outcomes_file.exists():
        shown = f" (see {run.log})" if run.log else " (see its output above)"
        raise SystemExit(f"the {run.name} run wrote no outcomes{shown}")


def outcomes_of(entry: str, outcomes: dict[str, dict[str, str]]) -> list[str]:
    """A listed entry's outcomes: its own, or its tests' where a module entry collected."""
    if entry in outcomes:
        return [outcomes[entry]["outcome"]]
    return [value["outcome"] for key, value in outcomes.items() if key.startswith(entry + "::")]


def judge(twin: str, outcomes: dict[str, dict[str, str]], differences: Differences) -> list[str]:
    """Print the run's numbers; the problems that fail it (`twin` names the run)."""
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
        f"{len(differences.tests)} listed in {differences.name}, "
        f"{len(not_run)} of them not run here"
    )
    return problems


def twins_differ(
    compiled: dict[str, dict[str, str]],
    pure: dict[str, dict[str, str]],
    differences: Differences,
    mode: str,
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
            f"twins differ ({mode}): {key}: "
            f"compiled {sides[0]['outcome']}, pure {sides[1]['outcome']}"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="fastapi")
    parser.add_argument("--fastapi", help="FastAPI version (default: the one installed here)")
    parser.add_argument(
        "--mode",
        choices=[*MODES, "both"],
        default="plain",
        help="FastAPI's routing (plain), install_dispatch on every app (dispatch), or both",
    )
    parser.add_argument(
        "--errors",
        choices=["msgspec", "fastapi"],
        default="msgspec",
        help='the default errors= of every MsgspecRouter the suite builds ("fastapi": '
        "judged against errors_differences.toml)",
    )
    parser.add_argument("--twin", choices=["both", "compiled", "pure"], default="both")
    parser.add_argument("--jobs", type=int, default=1, help="how many pytest processes run at once")
    parser.add_argument("--cache", type=Path, default=REPO / ".fastapi-suite")
    parser.add_argument(
        "--judge-only",
        action="store_true",
        help="judge the outcomes of the last runs again (after editing a list)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: passed on to pytest")
    args = parser.parse_args()
    suite = SUITES[args.suite]
    modes = list(MODES) if args.mode == "both" else [args.mode]
    if suite.dispatch_differences is None and modes != ["plain"]:
        parser.error(f"--suite {args.suite} runs in plain mode only")
    if suite.errors_differences is None and args.errors != "msgspec":
        parser.error(f"--suite {args.suite} runs with msgspec's errors only")
    fastapi_version = args.fastapi or importlib.metadata.version("fastapi")
    version = fastapi_version if args.suite == "fastapi" else UPSTREAM_VERSION
    cache = args.cache.resolve()
    cache.mkdir(exist_ok=True)
    tree = sdist_tree(cache, suite, version)
    python = suite_venv(cache, fastapi_version)
    twins = ["compiled", "pure"] if args.twin == "both" else [args.twin]
    runs = plan_runs(cache, tree, modes, twins, args.errors, args.jobs)
    started = time.monotonic()
    if args.judge_only:
        for run in runs:
            if not run.outcomes_file.exists():
                raise SystemExit(f"no outcomes of a {run.name} run to judge")
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            pending = [
                pool.submit(run_pytest, python, tree, suite, run, args.pytest_args) for run in runs
            ]
            for future in pending:
                future.result()
    elapsed = time.monotonic() - started

    vocabulary = f' with errors="{args.errors}"' if args.errors != "msgspec" else ""
    print(
        f"\n== {tree.name}'s suite at FastAPI {fastapi_version}, against msgspec-fastapi "
        f"here{vocabulary}"
    )
    problems = []
    for mode in modes:
        paths = [suite.differences]
        if args.errors == "fastapi" and suite.errors_differences is not None:
            paths = [suite.errors_differences]
        if mode == "dispatch" and suite.dispatch_differences is not None:
            paths.append(suite.dispatch_differences)
        differences = load_differences(*paths)
        outcomes = {
            run.twin: json.loads(run.outcomes_file.read_text()) for run in runs if run.mode == mode
        }
        for run in runs:
            if run.mode == mode:
                problems += judge(run.name, outcomes[run.twin], differences)
        if len(outcomes) == 2:
            problems += twins_differ(outcomes["compiled"], outcomes["pure"], differences, mode)
    if not args.judge_only:
        for run in runs:
            print(f"{run.name}: ran in {run.wall:.0f} s, {run.cpu:.0f} s of CPU")
        print(f"all {len(runs)} runs, {args.jobs} at a time: {elapsed:.0f} s")
    for problem in problems:
        print(problem)
    print("FAILED" if problems else "OK: every failure is a listed difference")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
