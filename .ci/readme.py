"""The README's install line and usage example, taken from README.md as a reader sees them.

    python .ci/readme.py wheel-install   # print the README's line that installs the wheel
    python .ci/readme.py usage           # run the README's usage example against the
                                         # installed package, from this folder's README.md

`make wheel-test` runs the first line in a fresh venv (from the folder holding
wheelhouse/), then the second from a folder without `src/`, so that the example runs
against the installed wheel with nothing but its own dependencies. tests/test_readme.py
loads this file by its path to compare the README's blocks with the docs' copies.
Only the standard library, and the installed package for `usage`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

README = Path("README.md")
FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def section(page: str, heading: str) -> str:
    """The text under `## heading` up to the next heading of that level."""
    start = page.index(f"\n## {heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def blocks(page: str, heading: str, lang: str) -> list[str]:
    """The fenced blocks of language `lang` under `## heading`, in order."""
    found = FENCE.finditer(section(page, heading))
    return [match.group("body") for match in found if match.group("lang") == lang]


def commands(block: str) -> list[str]:
    """A shell block's commands, each without its comment."""
    lines = (line.split("#", 1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line]


def wheel_install(page: str) -> str:
    """The README's `pip install` of the wheel `make wheel` builds."""
    found = [
        line
        for block in blocks(page, "Install", "sh")
        for line in commands(block)
        if line.startswith("pip install wheelhouse/")
    ]
    if len(found) != 1:
        raise SystemExit(f"readme: expected one `pip install wheelhouse/...` line, got {found}")
    return found[0]


def usage_example(page: str) -> str:
    (example,) = blocks(page, "Usage", "python")
    return example


async def post(app: Any, path: str, body: bytes) -> tuple[int, Any]:
    """One POST through the app's ASGI interface, as a server sends it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(answer)


def run_usage(page: str) -> None:
    """The README's example, run as a module of its own; then a request it must answer and
    one it must refuse, and its OpenAPI document."""
    module = ModuleType("readme_usage")
    exec(compile(usage_example(page), "README.md (Usage)", "exec"), module.__dict__)
    import msgspec_fastapi

    location = Path(msgspec_fastapi.__file__)
    if location.parent.parent.name != "site-packages":
        raise SystemExit(f"readme: msgspec_fastapi imported from {location}, not site-packages")
    lyon = {"name": "Lyon", "population": 522250}
    answer = asyncio.run(post(module.app, "/cities", json.dumps(lyon).encode()))
    assert answer == (200, lyon), answer
    bad = json.dumps({**lyon, "population": "many"}).encode()
    status, error = asyncio.run(post(module.app, "/cities", bad))
    assert status == 422 and [e["loc"] for e in error["detail"]] == [["body", "population"]]
    assert "City" in module.app.openapi()["components"]["schemas"]
    print(
        f"readme: the usage example answered as documented, {msgspec_fastapi.IMPLEMENTATION}"
        f" request path, msgspec_fastapi from {location.parent}"
    )


def main() -> None:
    page = README.read_text(encoding="utf-8")
    if sys.argv[1:] == ["wheel-install"]:
        print(wheel_install(page))
    elif sys.argv[1:] == ["usage"]:
        run_usage(page)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
