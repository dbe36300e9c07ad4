"""Real databases for tests: a PostgreSQL server of our own, and SQLite files.

The server runs on loopback with its own data directory and port, and is stopped at the
end. Without the Debian packages a test skips with the reason, except under CI=true,
where a missing database is a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

JARS = {"postgresql": "/usr/share/java/postgresql.jar",
        "sqlite": "/usr/share/java/sqlite-jdbc.jar"}
PACKAGES = {"postgresql": "postgresql libpostgresql-jdbc-java",
            "sqlite": "libxerial-sqlite-jdbc-java"}


def available_jars() -> list[str]:
    return [jar for jar in JARS.values() if os.path.exists(jar)]


def unavailable(reason: str) -> None:
    """Skip locally, fail under CI: a missing database is never reported as passing."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the set-up must install it)")
    pytest.skip(reason)


def require_jar(kind: str) -> None:
    if not os.path.exists(JARS[kind]):
        unavailable(f"{kind} JDBC driver {JARS[kind]} is absent "
                    f"(apt-get install {PACKAGES[kind]})")


@dataclass
class Database:
    """One database: its JDBC URL for deltamark, SQL for the test."""

    kind: str
    url: str
    dsn: str  # psycopg conninfo, or the SQLite file
    user: str | None = None
    password: str | None = None

    def execute(self, *statements: str, rows: list[tuple] | None = None) -> None:
        """Run statements (the last one once per row of ``rows``, if given) and commit."""
        execute(self.kind, self.dsn, *statements, rows=rows)

    def query(self, sql: str) -> list[tuple]:
        with _connection(self.kind, self.dsn) as conn:
            cursor = conn.cursor()
            cursor.execute(sql)
            return [tuple(r) for r in cursor.fetchall()]


def execute(kind: str, dsn: str, *statements: str, rows: list[tuple] | None = None) -> None:
    with _connection(kind, dsn) as conn:
        cursor = conn.cursor()
        for i, statement in enumerate(statements):
            if rows is not None and i == len(statements) - 1:
                cursor.executemany(_params(kind, statement), rows)
            else:
                cursor.execute(statement)
        conn.commit()


def _params(kind: str, statement: str) -> str:
    return statement.replace("?", "%s") if kind == "postgresql" else statement


@contextlib.contextmanager
def _connection(kind: str, dsn: str):
    if kind == "sqlite":
        conn = sqlite3.connect(dsn)
    else:
        import psycopg

        conn = psycopg.connect(dsn)
    try:
        yield conn
    finally:
        conn.close()


def sqlite_database(directory: Path) -> Database:
    require_jar("sqlite")
    path = directory / f"db-{uuid.uuid4().hex[:8]}.sqlite"
    return Database("sqlite", f"jdbc:sqlite:{path}", str(path))


class PostgresServer:
    """A PostgreSQL server in a temporary directory, owned by the postgres user when the
    tests run as root (PostgreSQL refuses to run as root)."""

    user = "deltamark"

    def __init__(self):
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not binaries:
            unavailable(f"PostgreSQL server is absent (apt-get install {PACKAGES['postgresql']})")
        require_jar("postgresql")
        self.bin = Path(binaries[-1]).parent
        self.password = secrets.token_urlsafe(16)
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="deltamark-pg-"))
        self.data = self.root / "data"
        self._as = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        password_file = self.root / "password"
        password_file.write_text(self.password)
        if self._as:
            os.chown(password_file, pwd.getpwnam("postgres").pw_uid, -1)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=scram-sha-256",
                  f"--pwfile={password_file}", "-E", "UTF8", "--no-sync")
        password_file.unlink()
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                  "-o", f"-p {self.port} -h 127.0.0.1 -k {self.root} -F "
                  "-c synchronous_commit=off -c shared_buffers=256MB", "start")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin / tool), *args], check=True,
                       capture_output=True, cwd=self.root)

    def dsn(self, database: str = "postgres") -> str:
        return (f"host=127.0.0.1 port={self.port} dbname={database} user={self.user} "
                f"password={self.password}")

    def database(self) -> Database:
        """A new, empty database on this server."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return Database("postgresql", f"jdbc:postgresql://127.0.0.1:{self.port}/{name}",
                        self.dsn(name), user=self.user, password=self.password)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
