"""One variant's app behind uvicorn, for `micro.py --deps --server` (see server.py).

    python -m micro.serve VARIANT --app deps|cities|table --port PORT --report FILE

(from bench/). `deps` is the variant's --deps app (deps.load(), without the override);
`cities` its app of the city routes and `table` its route-table app of one router
(worker.load()), the references without dependencies. The driver starts this under
taskset: uvicorn with httptools and the asyncio loop, one process, no access log. After
uvicorn has shut down (SIGINT), the sessions still open are written to FILE as JSON: every
yield dependency's teardown must have run.

`--icount LIBRARY:WARMUP:COUNT` is for `icount.py --deps --server`, which runs this under
callgrind: instruction counting (icount.py's helper LIBRARY) is switched on after WARMUP
HTTP requests and off after COUNT more, so that the counts cover uvicorn's work too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from common import Unavailable

from . import cities, deps, worker
from .asgi import ASGIApp
from .deps_common import Session


def build(variant: str, app: str) -> ASGIApp:
    """The variant's app; load() settles which msgspec_fastapi it imports, before any app."""
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("variant")
    parser.add_argument("--app", choices=("deps", "cities", "table"), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--icount", metavar="LIBRARY:WARMUP:COUNT")
    args = parser.parse_args()
    try:
        app = build(args.variant, args.app)
    except Unavailable as skip:
        args.report.write_text(json.dumps({"skipped": str(skip)}))
        return 3
    if args.icount:
        app = counted(app, args.icount)

    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        http="httptools",
        loop="asyncio",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    args.report.write_text(json.dumps({"sessions_open": Session.live}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
