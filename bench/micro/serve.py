"""One variant's app behind a server, for `micro.py --deps --server` (see server.py).

    python -m micro.serve VARIANT --app deps|cities|table --port PORT --report FILE
        [--server uvicorn|granian]

(from bench/). `deps` is the variant's --deps app (deps.load(), without the override);
`cities` its app of the city routes and `table` its route-table app of one router
(worker.load()), the references without dependencies. The driver starts this under
taskset. The servers, each as its command line would run it:

- uvicorn (the default): httptools, the asyncio loop, one process, no access log;
- granian: `--interface asgi`, one worker process (which the main process supervises),
  one runtime thread, its default runtime mode, the asyncio loop, HTTP/1 only, no access
  log. Its loader gives the worker the app, built before the fork (or in the worker,
  where Granian spawns it).

When the server shuts down (SIGINT), the app's lifespan ends, and the sessions still open
then are written to FILE as JSON: every yield dependency's teardown must have run. The
report is written from the lifespan because under Granian the app lives in the worker,
not in this process.

`--icount LIBRARY:WARMUP:COUNT` is for `icount.py --deps --server` and `causes.py
--server`, which run this under callgrind: instruction counting (icount.py's helper
LIBRARY) is switched on after WARMUP HTTP requests and off after COUNT more, so that the
counts cover the server's work too (under Granian, its worker's, Rust runtime included).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Unavailable

from . import cities, deps, worker
from .asgi import ASGIApp
from .deps_common import Session

SERVERS = ("uvicorn", "granian")


# The apps this process built: a forked Granian worker takes its app from here, as an
# import of the variant's msgspec_fastapi must come before any other (load() checks it).
_built: dict[tuple[str, str], ASGIApp] = {}


def build(variant: str, app: str) -> ASGIApp:
    """The variant's app; load() settles which msgspec_fastapi it imports, before any app."""
    if found := _built.get((variant, app)):
        return found
    _built[variant, app] = built = _build(variant, app)
    return built


def _build(variant: str, app: str) -> ASGIApp:
    if app == "deps":
        builder, _ = deps.load(variant)
        return builder(False)
    apps, _ = worker.load(variant)
    if app == "cities":
        if apps.cities is None:
            raise Unavailable(f"{variant} has no city app")
        return apps.cities(cities.make_dataset())
    if apps.table is None:
        raise Unavailable(f"{variant} has no route-table app")
    return apps.table(1)


def reporting(app: ASGIApp, report: Path) -> ASGIApp:
    """`app`, writing the sessions still open to `report` as its lifespan shuts down."""

    async def app_reporting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)

        async def send_reporting(message: Any) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                report.write_text(json.dumps({"sessions_open": Session.live}))
            await send(message)

        return await app(scope, receive, send_reporting)

    return app_reporting


def counted(app: ASGIApp, spec: str) -> ASGIApp:
    """`app`, with callgrind's counting on for requests WARMUP+1 to WARMUP+COUNT."""
    import ctypes

    library, warmup, count = spec.rsplit(":", 2)
    helper = ctypes.CDLL(library)
    first, last = int(warmup) + 1, int(warmup) + int(count)
    seen = 0

    async def app_counted(scope: Any, receive: Any, send: Any) -> None:
        nonlocal seen
        if scope["type"] != "http":
            return await app(scope, receive, send)
        seen += 1
        if seen == first:
            helper.icount_start()
        await app(scope, receive, send)
        if seen == last:
            helper.icount_stop()
        return None

    return app_counted


def served(app: ASGIApp, report: Path, icount: str | None) -> ASGIApp:
    """`app` as the server runs it: counted with `icount` where given, reporting."""
    return reporting(counted(app, icount) if icount else app, report)


def run_uvicorn(app: ASGIApp, port: int) -> None:
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        http="httptools",
        loop="asyncio",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )


def build_reporting(
    variant: str, app: str, report: Path, icount: str | None, _target: str
) -> ASGIApp:
    """Granian's loader, called in its worker: the app (this process's, when the worker was
    forked from it), counted with `icount` where given, reporting as it shuts down."""
    return served(build(variant, app), report, icount)


def run_granian(loader: Callable[[str], ASGIApp], port: int) -> None:
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.log import LogLevels
    from granian.server import Server

    server = Server(
        "micro.serve:app",  # a name only: the loader below builds the app
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGI,
        workers=1,
        runtime_threads=1,
        loop=Loops.asyncio,
        http=HTTPModes.http1,
        websockets=False,
        log_access=False,
        log_level=LogLevels.warning,
    )
    # Called in the worker process, which Granian forks or spawns (so, no closure).
    server.serve(target_loader=loader)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("variant")
    parser.add_argument("--app", choices=("deps", "cities", "table"), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--server", choices=SERVERS, default="uvicorn")
    parser.add_argument("--icount", metavar="LIBRARY:WARMUP:COUNT")
    args = parser.parse_args()
    try:
        app = build(args.variant, args.app)
    except Unavailable as skip:
        args.report.write_text(json.dumps({"skipped": str(skip)}))
        return 3
    if args.server == "uvicorn":
        run_uvicorn(served(app, args.report, args.icount), args.port)
    else:
        loader = functools.partial(
            build_reporting, args.variant, args.app, args.report, args.icount
        )
        run_granian(loader, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
