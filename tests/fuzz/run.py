"""Fuzz the request path for a while: `python tests/fuzz/run.py --seconds 60`.

With atheris installed (the test extra installs it on x86-64 Linux), libFuzzer drives
`fuzz_harness.check` with coverage feedback from the pure twin, the router and
Starlette; a failing input is written to FUZZ_ARTIFACTS (a directory) and can be
replayed with `python tests/fuzz/run.py FILE`. Without atheris, hypothesis draws the
requests instead, in rounds of 1,000 examples until the time is up.

Either way the run ends with one line: how many requests were tried, in how many seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

tried = 0
started = time.monotonic()


def report() -> None:
    seconds = time.monotonic() - started
    print(f"fuzz: {tried} requests tried in {seconds:.0f} s", flush=True)


def with_atheris(atheris: Any, seconds: int, replay: list[str]) -> None:
    with atheris.instrument_imports(include=["msgspec_fastapi"]):
        import fuzz_harness

    class AtherisSource:
        def __init__(self, data: bytes) -> None:
            self.fdp = atheris.FuzzedDataProvider(data)

        def pick(self, options: Any) -> Any:
            return options[self.fdp.ConsumeIntInRange(0, len(options) - 1)]

        def data(self, max_size: int) -> bytes:
            return self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, max_size))

        def number(self, upper: int) -> int:
            return self.fdp.ConsumeIntInRange(0, upper)

    def one_input(data: bytes) -> None:
        global tried
        tried += 1
        fuzz_harness.check(fuzz_harness.draw_request(AtherisSource(data)))
        if tried % 5000 == 0:
            report()

    artifacts = os.environ.get("FUZZ_ARTIFACTS", "/tmp/msgspec-fastapi-fuzz/")
    os.makedirs(artifacts, exist_ok=True)
    options = [
        f"-max_total_time={seconds}",
        "-max_len=2048",
        "-len_control=20",
        "-timeout=60",
        f"-artifact_prefix={artifacts.rstrip('/')}/",
        "-print_final_stats=1",
    ]
    atheris.Setup([sys.argv[0], *options, *replay], one_input)
    atheris.Fuzz()  # exits the process; libFuzzer prints "Done N runs in S second(s)"


def with_hypothesis(seconds: int) -> None:
    import fuzz_harness
    from hypothesis import HealthCheck, given, settings
    from test_fuzz import requests

    @settings(
        max_examples=1000, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(requests())
    def one_round(request: Any) -> None:
        global tried
        tried += 1
        fuzz_harness.check(request)

    deadline = started + seconds
    while time.monotonic() < deadline:
        one_round()
        report()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 60)))
    parser.add_argument("--hypothesis", action="store_true", help="do not use atheris")
    parser.add_argument("replay", nargs="*", help="atheris inputs to replay")
    args = parser.parse_args()
    try:
        if args.hypothesis:
            raise ImportError
        import atheris
    except ImportError:
        print("fuzz: atheris unavailable or not wanted; hypothesis draws the requests")
        with_hypothesis(args.seconds)
        return
    with_atheris(atheris, args.seconds, args.replay)


if __name__ == "__main__":
    main()
