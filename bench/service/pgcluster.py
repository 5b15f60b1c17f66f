"""A throwaway local PostgreSQL cluster for the benchmark.

It uses Debian's server binaries (/usr/lib/postgresql/*/bin), keeps its data directory on
tmpfs (/dev/shm) where possible, listens on 127.0.0.1 only, on a free port, and is
stopped and deleted when the ``with`` block ends, also on errors and Ctrl-C. PostgreSQL
refuses to run as root, so under root it runs as the ``postgres`` user via runuser.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import free_port
from database import postgres_url

USER = "bench"  # the cluster's superuser, trusted on 127.0.0.1 only
DATABASE = "postgres"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    # A throwaway copy of read-only data: durability does not matter.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "256MB",
    "max_connections": "100",
}


class PostgresUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Cluster:
    url: str
    port: int
    version: str
    data_dir: Path
    on_tmpfs: bool
    postmaster_pid: int


def find_bindir() -> Path:
    """The bin folder of the newest PostgreSQL server installed from Debian's packages."""
    found = []
    for candidate in Path("/usr/lib/postgresql").glob("*/bin"):
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            match = re.fullmatch(r"\d+", candidate.parent.name)
            found.append((int(match.group()) if match else 0, candidate))
    if not found:
        raise PostgresUnavailable(
            "no PostgreSQL server under /usr/lib/postgresql/*/bin"
            " (Debian: apt-get install -y postgresql)"
        )
    return max(found)[1]


def _runner() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs the server's tools, with the uid and gid they run as."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        account = pwd.getpwnam("postgres")
    except KeyError as error:
        raise PostgresUnavailable("running as root, but there is no 'postgres' user") from error
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root, but runuser is missing")
    return ["runuser", "-u", "postgres", "--"], account.pw_uid, account.pw_gid


def _scratch_parent() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextmanager
def postgres_cluster(cpu: int | None = None) -> Iterator[Cluster]:
    """Create, start, yield, then stop and delete a cluster; ``cpu`` pins its processes."""
    bindir = find_bindir()
    prefix, uid, gid = _runner()
    parent = _scratch_parent()
    base = Path(tempfile.mkdtemp(prefix="bench-service-pg-", dir=parent))
    data_dir = base / "data"
    started = False
    try:
        if uid is not None and gid is not None:
            os.chown(base, uid, gid)
        base.chmod(0o700)
        version = subprocess.run(
            [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        subprocess.run(
            [
                *prefix,
                str(bindir / "initdb"),
                "--pgdata",
                str(data_dir),
                "--username",
                USER,
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        port = free_port()
        options = " ".join(
            f"-c {key}={value}"
            for key, value in {
                **SETTINGS,
                "port": str(port),
                "unix_socket_directories": str(base),
            }.items()
        )
        pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
        started = True
        subprocess.run(
            [
                *pin,
                *prefix,
                str(bindir / "pg_ctl"),
                "--pgdata",
                str(data_dir),
                "--log",
                str(base / "server.log"),
                "--wait",
                "--timeout",
                "60",
                "--options",
                options,
                "start",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        yield Cluster(
            url=postgres_url("127.0.0.1", port, USER, DATABASE),
            port=port,
            version=version,
            data_dir=data_dir,
            on_tmpfs=parent is not None,
            postmaster_pid=int((data_dir / "postmaster.pid").read_text().split()[0]),
        )
    except subprocess.CalledProcessError as error:
        log = base / "server.log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise PostgresUnavailable(
            f"{' '.join(map(str, error.cmd))} failed:\n{error.stdout}{error.stderr}{detail}"
        ) from error
    finally:
        if started:
            subprocess.run(
                [
                    *prefix,
                    str(bindir / "pg_ctl"),
                    "--pgdata",
                    str(data_dir),
                    "--mode",
                    "immediate",
                    "--wait",
                    "stop",
                ],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)
