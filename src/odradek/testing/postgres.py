"""A private PostgreSQL server for tests, from the installed server binaries.

``PostgresServer()`` runs ``initdb`` into a temporary directory and starts
``postgres`` on a free port of 127.0.0.1 with ``wal_level=logical`` (logical
replication slots and WAL senders enabled), trust authentication, and the
superuser ``postgres``; :attr:`url` is its ``postgresql://`` URL (database
``postgres``). PostgreSQL refuses to run as root, so as root the server runs as
the unprivileged system user :data:`OS_USER` (created with ``useradd --system``
when missing), which owns the directory. :meth:`stop` asks for a fast shutdown
(SIGINT), then kills; the directory is removed.

The binaries are looked up in :data:`BIN_DIRS` (Debian's PostgreSQL 15 first);
:func:`find_bin_dir` returns None when there are none, so fixtures can skip.

Fixtures (registered by :mod:`odradek.testing.pytest_plugin`):
``postgres_server`` (one per session, skipped when the binaries are absent) and
``postgres_url`` (a new empty database on it, per test).
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin",
            "/usr/lib/postgresql/17/bin")
OS_USER = "odradek-pg"


def find_bin_dir() -> Path | None:
    """The first directory of :data:`BIN_DIRS` with ``initdb`` and ``postgres``."""
    for d in BIN_DIRS:
        p = Path(d)
        if (p / "initdb").is_file() and (p / "postgres").is_file():
            return p
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _os_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None when not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(OS_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                               "/usr/sbin/nologin", OS_USER], capture_output=True)
        try:  # another test process may have created it at the same time
            entry = pwd.getpwnam(OS_USER)
        except KeyError:
            raise RuntimeError(f"could not create the OS user {OS_USER}: "
                               f"{made.stderr.decode(errors='replace').strip()}") from None
    return entry.pw_uid, entry.pw_gid


class PostgresServer:
    def __init__(self, *, bin_dir: Path | None = None, startup_timeout: float = 60.0) -> None:
        found = bin_dir or find_bin_dir()
        if found is None:
            raise FileNotFoundError(f"no PostgreSQL server binaries in {', '.join(BIN_DIRS)}")
        self.bin_dir = found
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "postgres"
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/postgres"

    def _popen_kwargs(self) -> dict[str, object]:
        ids = _os_user()
        if ids is None:
            return {}
        return {"user": ids[0], "group": ids[1], "extra_groups": []}

    def start(self) -> PostgresServer:
        ids = _os_user()
        self.dir = Path(tempfile.mkdtemp(prefix="odradek-pg-"))
        os.chmod(self.dir, 0o700)
        if ids is not None:
            os.chown(self.dir, *ids)
        data = self.dir / "data"
        log = self.dir / "server.log"
        kw = self._popen_kwargs()
        init = subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            capture_output=True, cwd=self.dir, **kw)  # type: ignore[call-overload]
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.decode(errors='replace')}")
        self.port = _free_port()
        settings = {
            "listen_addresses": self.host, "port": str(self.port),
            "unix_socket_directories": str(self.dir), "wal_level": "logical",
            "max_replication_slots": "20", "max_wal_senders": "20", "fsync": "off",
            "synchronous_commit": "off", "full_page_writes": "off",
            "shared_buffers": "64MB",
        }
        args = [str(self.bin_dir / "postgres"), "-D", str(data)]
        for k, v in settings.items():
            args += ["-c", f"{k}={v}"]
        with open(log, "wb") as out:
            if ids is not None:
                os.chown(log, *ids)
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.dir, **kw)  # type: ignore[call-overload]
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.dir is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited: "
                                   + (self.dir / "server.log").read_text(errors="replace"))
            ready = subprocess.run([str(self.bin_dir / "pg_isready"), "-h", self.host,
                                    "-p", str(self.port), "-U", self.user, "-d", "postgres"],
                                   capture_output=True)
            if ready.returncode == 0:
                return
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"postgres did not accept connections in {self.startup_timeout} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL server for the session (skipped without the binaries)."""
    if find_bin_dir() is None:
        pytest.skip(f"PostgreSQL server binaries not installed (looked in {', '.join(BIN_DIRS)};"
                    " Debian: apt-get install postgresql-15)")
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The ``postgresql://`` URL of a new, empty database on the session's server
    (needs psycopg2, the ``connect`` extra)."""
    psycopg2 = pytest.importorskip("psycopg2")
    name = f"t{next(_databases)}"
    conn = psycopg2.connect(postgres_server.url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return postgres_server.url.rsplit("/", 1)[0] + "/" + name
