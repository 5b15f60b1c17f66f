"""A pytest plugin that writes each test's outcome to a JSON file, for run.py to judge.

Loaded with `-p outcomes --outcomes=FILE`. FILE maps each node id to its outcome
("passed", "failed", "error" for a failing setup, teardown or collection, "skipped",
"xfailed", "xpassed") and, where it failed, the first line of what went wrong. A module
that fails to collect appears under its own node id (its path).

With MSGSPEC_FASTAPI_EXPECT set ("compiled" or "pure"), the session stops at once when the
package picked the other twin (a compiled module that did not load, say).
"""

from __future__ import annotations

import json
import os

import pytest

import msgspec_fastapi

FAILING = ("failed", "error")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--outcomes", metavar="FILE", help="write each test's outcome to FILE")


def pytest_configure(config: pytest.Config) -> None:
    expected = os.environ.get("MSGSPEC_FASTAPI_EXPECT")
    if expected and expected != msgspec_fastapi.IMPLEMENTATION:
        pytest.exit(
            f"MSGSPEC_FASTAPI_EXPECT={expected!r} but msgspec_fastapi.IMPLEMENTATION is "
            f"{msgspec_fastapi.IMPLEMENTATION!r}",
            returncode=3,
        )
    path = config.getoption("--outcomes")
    if path:
        config.pluginmanager.register(OutcomeRecorder(path), "outcome-recorder")


def _message(report: pytest.CollectReport | pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = (crash.message if crash is not None else str(report.longrepr)).strip()
    return text.splitlines()[0] if text else ""


class OutcomeRecorder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.outcomes: dict[str, dict[str, str]] = {}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = {"outcome": "error", "message": _message(report)}
        elif report.skipped:
            self.outcomes[report.nodeid] = {"outcome": "skipped"}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.outcomes.get(report.nodeid, {}).get("outcome") in FAILING:
            return  # the first failure of a test is the one that counts
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            self.outcomes[report.nodeid] = {"outcome": outcome, "message": _message(report)}
        elif hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
            self.outcomes[report.nodeid] = {"outcome": outcome, "message": report.wasxfail}
        elif report.when == "call" or report.skipped:
            self.outcomes[report.nodeid] = {"outcome": report.outcome}

    def pytest_sessionfinish(self) -> None:
        with open(self.path, "w", encoding="utf-8") as file:
            json.dump(self.outcomes, file, indent=1, sort_keys=True)
