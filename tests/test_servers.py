"""Real servers: uvicorn (httptools and h11) and hypercorn serve `hostile_app`.

Each server runs in a subprocess on 127.0.0.1 and a free port, on the twin the session
runs (MSGSPEC_FASTAPI_PURE is passed on). 1,200 requests of mixed kinds go out at once:
valid bodies, malformed JSON, a wrong field type, a wrong content type, bodies over a
route's limit (declared and chunked), valid and invalid parameters, on both tiers. They
are spread over 10 httpx AsyncClients of 10 connections each: a single client with a
pool of 100 spends most of the time on its own queue of waiting requests. Every answer
must carry the status of its kind and exactly the body the same app gives in-process.
Then the server is sent SIGTERM and must exit by itself, leave no process behind, and
have logged no error.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hostile_app import EVERYTHING, SMALL_LIMIT, TIERS, build_app
from raw_asgi import send_request

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
REQUESTS = 1_200
CLIENTS = 10
CONNECTIONS_PER_CLIENT = 10
START_TIMEOUT = 30
LOAD_TIMEOUT = 120
STOP_TIMEOUT = 20

# Keep-alive longer than the 5 s defaults: on a loaded machine a client may reuse a
# pooled connection just as the server times it out, which reads as a dropped request.
SERVERS = {
    "uvicorn-httptools": [
        "-m",
        "uvicorn",
        "--http",
        "httptools",
        "--no-access-log",
        "--timeout-keep-alive",
        "60",
    ],
    "uvicorn-h11": [
        "-m",
        "uvicorn",
        "--http",
        "h11",
        "--no-access-log",
        "--timeout-keep-alive",
        "60",
    ],
    "hypercorn": ["-m", "hypercorn", "--keep-alive", "60"],
}

VALID = msgspec.json.encode(EVERYTHING)
JSON = {"content-type": "application/json"}
OVER_LIMIT = msgspec.json.encode({"name": "x" * SMALL_LIMIT})


async def chunked(body: bytes) -> AsyncIterator[bytes]:
    """A body without a Content-Length: httpx sends it chunked."""
    for start in range(0, len(body), 16):
        yield body[start : start + 16]


URLENCODED = {"content-type": "application/x-www-form-urlencoded"}
MULTIPART = {"content-type": "multipart/form-data; boundary=xx"}
MULTIPART_FORM = (
    b'--xx\r\nContent-Disposition: form-data; name="name"\r\n\r\nada\r\n'
    b'--xx\r\nContent-Disposition: form-data; name="avatar"; filename="a.png"\r\n\r\n'
    b"png\r\n--xx--\r\n"
)

# name -> (method, target, headers, body, status); the body may be a chunked stream.
KINDS: dict[str, tuple[str, str, dict[str, str], Any, int]] = {
    "valid body": ("POST", "/everything", JSON, VALID, 200),
    "malformed JSON": ("POST", "/everything", JSON, b'{"text": "Lyon",', 400),
    "wrong field type": ("POST", "/everything", JSON, VALID.replace(b"3", b'"3"', 1), 422),
    "wrong content type": ("POST", "/everything", {"content-type": "text/plain"}, VALID, 415),
    "no body": ("POST", "/everything", JSON, b"", 422),
    "over the limit, declared": ("POST", "/small", JSON, OVER_LIMIT, 413),
    "over the limit, chunked": ("POST", "/small", JSON, chunked, 413),
    "within the limit, chunked": ("POST", "/small", JSON, chunked, 200),
    "valid parameters": ("GET", "/items/7?q=%E9%9B%BB&n=%2B5&tags=a&tags=b", {}, b"", 200),
    "invalid parameters": ("GET", "/items/x?n=1e3", {}, b"", 422),
    "urlencoded form": ("POST", "/form", URLENCODED, b"name=ada&tags=a&tags=b", 200),
    "multipart form with a file": ("POST", "/form", MULTIPART, MULTIPART_FORM, 200),
    "malformed multipart": ("POST", "/form", MULTIPART, b"\x00\xff" * 100, 400),
}
CHUNKED_BODIES = {
    "over the limit, chunked": OVER_LIMIT,
    "within the limit, chunked": b'{"name": "x"}',
}


def requests() -> list[tuple[str, str]]:
    """(kind, tier) for every request, the kinds interleaved."""
    pairs = [(kind, tier) for tier in TIERS for kind in KINDS]
    return [pairs[i % len(pairs)] for i in range(REQUESTS)]


def in_process_answers() -> dict[tuple[str, str], tuple[int, bytes]]:
    """What the same app answers each (kind, tier) without a server in between."""
    app = build_app()
    answers = {}
    for tier in TIERS:
        for kind, (method, target, headers, body, _) in KINDS.items():
            raw_headers = [(k.encode(), v.encode()) for k, v in headers.items()]
            if callable(body):
                body = CHUNKED_BODIES[kind]
            elif body:
                raw_headers.append((b"content-length", str(len(body)).encode()))
            reply = asyncio.run(
                send_request(app, method, f"/{tier}{target}".encode(), raw_headers, [body])
            )
            answers[kind, tier] = (reply.status, reply.body)
    return answers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(server: str, port: int, log: Any) -> subprocess.Popen[bytes]:
    bind = ["--bind", f"127.0.0.1:{port}"] if server == "hypercorn" else ["--host", "127.0.0.1"]
    port_option = [] if server == "hypercorn" else ["--port", str(port)]
    command = [sys.executable, *SERVERS[server], *bind, *port_option, "hostile_app:app"]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return subprocess.Popen(command, cwd=TESTS, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_until_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server did not listen within {START_TIMEOUT} s")


async def send_all(port: int) -> list[tuple[str, str, int, bytes]]:
    limits = httpx.Limits(max_connections=CONNECTIONS_PER_CLIENT)
    base = f"http://127.0.0.1:{port}"
    clients = [httpx.AsyncClient(base_url=base, limits=limits, timeout=60) for _ in range(CLIENTS)]

    async def one(client: httpx.AsyncClient, kind: str, tier: str) -> tuple[str, str, int, bytes]:
        method, target, headers, body, _ = KINDS[kind]
        content = body(CHUNKED_BODIES[kind]) if callable(body) else body
        response = await client.request(
            method, f"/{tier}{target}", headers=headers, content=content
        )
        return kind, tier, response.status_code, response.content

    try:
        return await asyncio.gather(
            *(one(clients[i % CLIENTS], kind, tier) for i, (kind, tier) in enumerate(requests()))
        )
    finally:
        for client in clients:
            await client.aclose()


def stop(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM, then wait; True when the server left by itself in time."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)
        return False


def is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module", params=list(SERVERS))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Start one server, send it the load, stop it; everything the tests look at."""
    server = request.param
    log_path = tmp_path_factory.mktemp(server) / "server.log"
    port = free_port()
    with open(log_path, "wb") as log:
        process = start(server, port, log)
        try:
            wait_until_listening(process, port)
            began = time.monotonic()
            replies = asyncio.run(asyncio.wait_for(send_all(port), LOAD_TIMEOUT))
            seconds = time.monotonic() - began
        finally:
            stopped = stop(process)
    print(f"\n{server}: {len(replies)} concurrent requests answered in {seconds:.1f} s")
    return {
        "replies": replies,
        "stopped": stopped,
        "returncode": process.returncode,
        "gone": is_gone(process.pid),
        "log": log_path.read_text(errors="replace"),
    }


@pytest.fixture(scope="module")
def expected() -> dict[tuple[str, str], tuple[int, bytes]]:
    return in_process_answers()


def test_in_process_answers_have_the_documented_statuses(expected: Any) -> None:
    assert {key: status for key, (status, _) in expected.items()} == {
        (kind, tier): KINDS[kind][4] for kind in KINDS for tier in TIERS
    }


def test_every_request_was_answered(served: dict[str, Any]) -> None:
    assert len(served["replies"]) == REQUESTS


def test_every_answer_is_the_in_process_answer(served: dict[str, Any], expected: Any) -> None:
    wrong = [
        (kind, tier, status, body[:200])
        for kind, tier, status, body in served["replies"]
        if (status, body) != expected[kind, tier]
    ]
    assert wrong == []


def test_server_stops_on_sigterm(served: dict[str, Any]) -> None:
    assert served["stopped"]
    # uvicorn shuts down gracefully, then raises the signal it caught again.
    assert served["returncode"] in (0, -signal.SIGTERM)


def test_no_process_is_left_behind(served: dict[str, Any]) -> None:
    assert served["gone"]


def test_server_logged_no_error(served: dict[str, Any]) -> None:
    assert "Traceback" not in served["log"]
    assert "Exception in ASGI application" not in served["log"]
