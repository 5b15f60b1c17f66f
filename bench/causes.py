"""Where the time of a request goes, by cause: instructions, first-level cache misses and
allocations per request, of our two twins beside BlackSheep and the bare ASGI app.

Each variant runs each route under callgrind (bench/icount.py's worker: warm-up, then a
counted batch with every answer checked) twice, with a batch of N and of 2N requests; the
figures per request are the second run's counts less the first's, over N. So what is
counted once per batch (the simulated caches start empty at the batch's start, the batch's
own set-up) drops out, and what is left is the steady state of one more request.

- instructions: callgrind's `Ir`.
- I1 and D1 misses: first-level instruction- and data-cache misses (D1: reads and writes)
  of callgrind's cache model, pinned to one geometry (CACHE_MODEL) so that the figures do
  not depend on the machine they were counted on. The I1 misses are also split by the
  binary whose code missed (callgrind_objects.py): the interpreter, the framework's own
  compiled modules (ours or BlackSheep's), msgspec, libc.
- allocations: blocks asked of an allocator by code outside the allocators (see
  callgrind_calls.py); an object reused from a type's free list is not one.

All of them are deterministic for a given build: address randomisation is off and the
hash seed fixed, as in icount.py.

`--server` counts the same figures for the whole server process serving a route
(icount.py's --deps --server run, requests sent over loopback one at a time): the
server's own code competes with the framework's for the first-level caches there. It
counts the dependency routes unless `--routes` names others (the city routes too), behind
uvicorn, or behind Granian with `--server-kind granian` (its worker process, whose Rust
runtime's work is counted with the rest).

    python bench/causes.py                                  # make bench-causes
    python bench/causes.py --variants compiled --routes get,deps/two-get --requests 50
    python bench/causes.py --server                         # behind uvicorn
    python bench/causes.py --server --server-kind granian   # behind Granian
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import icount
from callgrind_calls import read_allocator_calls
from callgrind_objects import GROUPS, OTHER, self_cost_by_group
from common import log, run_record, versions
from micro.serve import SERVERS
from micro.server import SERVER_LABELS
from tables import SERVER_NAMES, table

VARIANTS = ("compiled", "pure", "blacksheep", "bare")
ROUTES = ("get", "list", "validate", "search", "deps/two-get", "deps/two-post")
# What --server counts unless told which routes (it counts any of ROUTES).
SERVER_DEFAULT_ROUTES = ("deps/two-get", "deps/two-post")
BASE = "blacksheep"
# A common first level of current x86 cores (32 KiB, 8-way, 64-byte lines, each of
# instruction and data); the last level matters little here and is only required.
CACHE_MODEL = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
CAUSES = ("instructions", "I1", "D1", "allocations")
HEADINGS = {
    "instructions": "instructions",
    "I1": "I1 misses",
    "D1": "D1 misses",
    "allocations": "allocations",
}
GROUP_NAMES = tuple(dict.fromkeys([*(group for group, _ in GROUPS), OTHER]))
# The I1 misses in the interpreter and in the framework's own compiled modules (ours, or
# BlackSheep's), shown beside the total; the rest are msgspec's, libc's and others'.
SPLIT = {"interpreter": ("interpreter",), "framework": ("ours", "blacksheep")}


def counted(
    variant: str,
    route: str,
    requests: int,
    library: Path,
    folder: Path,
    env: dict[str, str],
    server: str | None = None,
) -> dict[str, float]:
    """The events and allocator calls of one batch of `requests` requests, in process or
    behind `server`, uvicorn or granian (the whole server process counted)."""
    out_prefix = folder / f"{variant}.{route.replace('/', '.')}.{requests}"
    if server:
        out_prefix.mkdir()
        out_prefix = icount.run_server(
            variant, route, requests, library, out_prefix, True, CACHE_MODEL, env, server
        )
    else:
        icount.run_in_process(variant, route, requests, library, out_prefix, True, CACHE_MODEL, env)
    events = icount.read_events(out_prefix)
    found: dict[str, float] = {
        "instructions": events["Ir"],
        "I1": events["I1mr"],
        "D1": events["D1mr"] + events["D1mw"],
    }
    dumped = Path(f"{out_prefix}.1")
    found.update(read_allocator_calls(dumped))
    by_group = self_cost_by_group(dumped.read_text(), "I1mr")
    for group in GROUP_NAMES:
        found[f"I1 in {group}"] = by_group[group]
    return found


def per_request(
    variant: str,
    route: str,
    requests: int,
    library: Path,
    folder: Path,
    env: dict[str, str],
    server: str | None = None,
) -> dict[str, float]:
    """Each figure of one request more: the batch of 2N less the batch of N, over N."""
    once = counted(variant, route, requests, library, folder, env, server)
    twice = counted(variant, route, 2 * requests, library, folder, env, server)
    return {key: (twice[key] - once[key]) / requests for key in once}


def measure(
    variants: list[str],
    routes: list[str],
    requests: int,
    jobs: int,
    env: dict[str, str] | None = None,
    server: str | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """route -> variant -> figure -> value per request; with `server`, behind it."""
    environment = dict(os.environ if env is None else env)
    with tempfile.TemporaryDirectory(prefix="causes-") as tmp:
        folder = Path(tmp)
        library = icount.build_helper(folder)
        cases = [(route, variant) for route in routes for variant in variants]
        log(f"{2 * len(cases)} runs under callgrind, {jobs} at a time")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {
                case: pool.submit(
                    per_request, case[1], case[0], requests, library, folder, environment, server
                )
                for case in cases
            }
            found: dict[str, dict[str, dict[str, float]]] = {route: {} for route in routes}
            for (route, variant), future in futures.items():
                found[route][variant] = future.result()
                log(f"{variant} {route}: {found[route][variant]}")
    return found


def ratio_cell(value: float, base: float | None) -> str:
    return f"{value / base:.2f}x" if base else "-"


def rows(
    found: dict[str, dict[str, dict[str, float]]],
    base: str,
    causes: tuple[str, ...] = CAUSES,
    split: bool = True,
) -> list[list[str]]:
    """One row per route and variant: each figure, then its ratio to `base`'s; with `split`,
    the I1 misses in the interpreter and in the framework's modules after theirs."""
    result = []
    for route, by_variant in found.items():
        reference = by_variant.get(base)
        for variant, figures in by_variant.items():
            cells = [route, variant]
            for cause in causes:
                cells.append(f"{figures[cause]:,.0f}")
                cells.append(ratio_cell(figures[cause], reference[cause] if reference else None))
                if cause == "I1" and split:
                    for groups in SPLIT.values():
                        cells.append(f"{sum(figures[f'I1 in {g}'] for g in groups):,.0f}")
            result.append(cells)
    return result


def columns(
    base: str, causes: tuple[str, ...] = CAUSES, kind: str = "variant", split: bool = True
) -> list[str]:
    heads = ["route", kind]
    for cause in causes:
        heads += [HEADINGS[cause], f"vs {base}"]
        if cause == "I1" and split:
            heads += [f"I1 in the {part}" for part in SPLIT]
    return heads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--variants", help=f"default {','.join(VARIANTS)}; with --server, all but bare"
    )
    parser.add_argument("--routes", help=f"default {','.join(ROUTES)}")
    parser.add_argument("--requests", type=int, default=100, help="N: batches of N and 2N")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the table and the figures here")
    parser.add_argument(
        "--server",
        action="store_true",
        help="count the whole server process serving the route (default routes"
        " deps/two-get,deps/two-post), as icount.py --deps --server",
    )
    parser.add_argument(
        "--server-kind",
        choices=SERVERS,
        default="uvicorn",
        help="--server: the server, as micro.py --deps --server runs it (default uvicorn)",
    )
    args = parser.parse_args()
    default_variants = [v for v in VARIANTS if not (args.server and v == "bare")]
    variants = [v for v in (args.variants or ",".join(default_variants)).split(",") if v]
    default_routes = ",".join(SERVER_DEFAULT_ROUTES if args.server else ROUTES)
    routes = [r for r in (args.routes or default_routes).split(",") if r]
    if args.requests < 1:
        parser.error("--requests below 1")
    if args.server_kind != "uvicorn" and not args.server:
        parser.error("--server-kind is a part of --server")
    if args.server:
        if unserved := [r for r in routes if r not in ROUTES]:
            parser.error(f"--server counts {', '.join(ROUTES)} only, not {unserved}")
        if "bare" in variants and any(r.startswith(icount.DEPS_PREFIX) for r in routes):
            parser.error("--server: the bare app has no dependency routes")
    server = args.server_kind if args.server else None
    found = measure(variants, routes, args.requests, args.jobs, server=server)
    base = BASE if BASE in variants else variants[0]
    where = f"behind {SERVER_NAMES[server]}, the whole server process" if server else "in process"
    title = (
        f"Per request, by cause ({where}; callgrind, one request more over batches of"
        f" {args.requests:,} and {2 * args.requests:,}); vs {base}: ratio to {base}'s figure"
    )
    print(title)
    print(table(columns(base), rows(found, base), right_from=2))
    if args.json is not None:
        document: dict[str, Any] = {
            "benchmark": "table",
            "title": title,
            "run": run_record(versions(("fastapi", "starlette", "msgspec", "blacksheep"))),
            "columns": columns(base),
            "rows": rows(found, base),
            "meta": {
                "requests": args.requests,
                "cache_model": list(CACHE_MODEL),
                "server": f"{SERVER_LABELS[server]}, as micro.py --deps --server"
                if server
                else None,
            },
            "per_request": found,
        }
        document["run"]["note"] = (
            "I1/D1: first-level misses of callgrind's cache model, pinned to 32 KiB 8-way"
            " caches; allocations: blocks asked of an allocator by code outside the"
            " allocators; "
            + (
                "behind a server, the instructions vary between runs by up to about 5%, the"
                " misses by up to about 3% and the allocations by a few (the server's own"
                " work between requests); the misses in each framework's own modules repeat"
                if server
                else "deterministic counts, which the machine's load does not change"
            )
        )
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
