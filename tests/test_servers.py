"""Real servers: uvicorn (httptools and h11), hypercorn and Granian serve `hostile_app`.

Each server runs in a subprocess on 127.0.0.1 and a free port, on the twin the session
runs (MSGSPEC_FASTAPI_PURE is passed on). 1,200 requests of mixed kinds go out at once:
valid bodies, malformed JSON, a wrong field type, a wrong content type, bodies over a
route's limit (declared and chunked), valid and invalid parameters, JSON Lines and
server-sent event streams, on both tiers. They are spread over 10 httpx AsyncClients of
10 connections each: a single client with a pool of 100 spends most of the time on its
own queue of waiting requests. Every answer must carry the status of its kind and
exactly the body the same app gives in-process. Then clients go away mid-body and
mid-stream (an endless one, whose generator must be closed), and a request after them
must still be answered. Then the server is sent SIGTERM and must exit by itself, its
lifespan ended, leave no process behind (Granian's workers included), and have logged
no error.
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
from hostile_app import EVERYTHING, LIFESPAN_LINES, SMALL_LIMIT, TICKS_CLOSED, TIERS, build_app
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
    # One worker process, its default runtime (one thread, one event loop); no access log
    # by default. Granian has no keep-alive timeout to raise.
    "granian": ["-m", "granian", "--interface", "asgi", "--workers", "1"],
}
# How long the generator of a stream whose client left may take to be closed.
CLOSE_TIMEOUT = 10

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
    "JSON Lines stream": ("GET", "/lines/40", {}, b"", 200),
    "JSON Lines stream, sync generator": ("GET", "/sync-lines/40", {}, b"", 200),
    "server-sent events": ("GET", "/events/5", {}, b"", 200),
}
STREAMS = ("JSON Lines stream", "JSON Lines stream, sync generator", "server-sent events")
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
            # A stream runs to its end only while the client stays (see raw_asgi).
            then = "wait" if kind in STREAMS else "disconnect"
            reply = asyncio.run(
                send_request(
                    app, method, f"/{tier}{target}".encode(), raw_headers, [body], then=then
                )
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


def raw_exchange(port: int, request: bytes, read_at_least: int) -> bytes:
    """Send `request` on a new connection, read `read_at_least` bytes (0: none), then
    close the connection: a client that goes away before the exchange is over."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=LOAD_TIMEOUT) as connection:
        connection.sendall(request)
        while len(received) < read_at_least:
            chunk = connection.recv(4096)
            if not chunk:
                break
            received += chunk
    return received


def leave_mid_body(port: int, tier: str) -> None:
    """Declare a body of 1,000 bytes, send 10 of them, and go."""
    raw_exchange(
        port,
        f"POST /{tier}/everything HTTP/1.1\r\nhost: test\r\n"
        "content-type: application/json\r\ncontent-length: 1000\r\n\r\n".encode()
        + VALID[:10],
        0,
    )


def leave_mid_stream(port: int, tier: str) -> bytes:
    """Read the start of an endless stream, then go; what was read."""
    return raw_exchange(port, f"GET /{tier}/ticks HTTP/1.1\r\nhost: test\r\n\r\n".encode(), 2_000)


def wait_for_lines(log_path: Path, line: str, count: int) -> int:
    """How often `line` is in the log once it is there `count` times, or the time is up."""
    deadline = time.monotonic() + CLOSE_TIMEOUT
    while True:
        found = log_path.read_text(errors="replace").count(line)
        if found >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux: from /proc), children first."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                pending.append(child)
    return found


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
    """The process has exited (a zombie waiting for init to reap it counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def left_after(pids: list[int], grace: float) -> list[int]:
    """The processes still running `grace` seconds after the server's main process left:
    hypercorn's exits before its worker has finished shutting down."""
    deadline = time.monotonic() + grace
    while True:
        left = [pid for pid in pids if not is_gone(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


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
            streamed = {}
            for tier in TIERS:
                leave_mid_body(port, tier)
                streamed[tier] = leave_mid_stream(port, tier)
            closed = wait_for_lines(log_path, TICKS_CLOSED, len(TIERS))
            after = httpx.post(
                f"http://127.0.0.1:{port}/direct/everything", content=VALID, headers=JSON
            )
            processes = [process.pid, *descendants(process.pid)]
        finally:
            stopped = stop(process)
    print(f"\n{server}: {len(replies)} concurrent requests answered in {seconds:.1f} s")
    return {
        "replies": replies,
        "streamed": streamed,
        "closed": closed,
        "after": (after.status_code, after.content),
        "stopped": stopped,
        "returncode": process.returncode,
        "processes": processes,
        "left": left_after(processes, STOP_TIMEOUT),
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


def test_stream_was_sent_before_the_client_left(served: dict[str, Any]) -> None:
    for tier in TIERS:
        head, _, body = served["streamed"][tier].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), tier
        assert b'{"x":1,"y":-1}' in body, tier


def test_endless_stream_is_closed_when_its_client_leaves(served: dict[str, Any]) -> None:
    assert served["closed"] == len(TIERS)


def test_request_after_clients_left_is_answered(served: dict[str, Any], expected: Any) -> None:
    assert served["after"] == expected["valid body", "direct"]


def test_lifespan_started_and_ended(served: dict[str, Any]) -> None:
    log = served["log"]
    started, ended = (log.find(line) for line in LIFESPAN_LINES)
    assert 0 <= started < ended
    assert log.count(LIFESPAN_LINES[0]) == log.count(LIFESPAN_LINES[1]) == 1


def test_server_stops_on_sigterm(served: dict[str, Any]) -> None:
    assert served["stopped"]
    # uvicorn shuts down gracefully, then raises the signal it caught again.
    assert served["returncode"] in (0, -signal.SIGTERM)


def test_no_process_is_left_behind(served: dict[str, Any]) -> None:
    assert served["left"] == []


def test_server_logged_no_error(served: dict[str, Any]) -> None:
    assert "Traceback" not in served["log"]
    assert "Exception in ASGI application" not in served["log"]
