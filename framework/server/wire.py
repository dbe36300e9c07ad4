"""How deltamark servers are found and spoken to.

A server listens on a Unix socket in a directory only its user can enter. Each request is
one JSON line on a connection of its own; a ``run`` request carries the command's stdin,
stdout and stderr as file descriptors (SCM_RIGHTS), so the command writes where its
client would have. The server answers with JSON lines on the same connection.

A server is only good for clients whose Spark JVM would be the same: its key digests
what the JVM takes at start (the Spark conf, the environment Spark, Hadoop and AWS read,
the working directory relative paths resolve against) and the code it runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from framework.config import Settings
from framework.errors import ServerError
from framework.spark.session import session_conf

__all__ = ["ADDRESS_ENV", "CommandStatus", "Lines", "RunningServer", "ServerStatus", "key",
           "runtime_dir", "send", "socket_path"]


class CommandStatus(TypedDict):
    """A command a server runs: the ``deltamark`` arguments of its forked process."""

    pid: int
    argv: list[str]
    attached: bool  # its client is still connected
    seconds: float


class ServerStatus(TypedDict):
    """What a server says of itself (its answer to ``status``; ``stop`` answers it too)."""

    key: str
    pid: int
    cwd: str
    conf_dir: str
    private: bool
    started_at: str  # ISO time
    idle_minutes: float
    driver_memory: str | None
    jvm_pid: int | None
    jvm_starts: int
    commands_run: int
    stopping: bool
    commands: list[CommandStatus]


class RunningServer(ServerStatus):
    """A running server's status, and its socket."""

    socket: str

#: set in the commands a server forks: its socket, where they ask for a session in its JVM
ADDRESS_ENV = "DELTAMARK_SERVER"

#: environment variables a JVM reads at start: a server started with other values is not
#: the JVM its clients would start (credentials, endpoints, Java and Spark options)
_JVM_ENVIRONMENT = ("AWS_", "JAVA_", "_JAVA_", "JDK_", "SPARK_", "HADOOP_", "PYSPARK_",
                    "PYTHONPATH", "TZ", "LANG", "LC_")

#: bytes read at a time; a request (with the client's environment) fits in one read
_CHUNK = 1 << 20


def key(settings: Settings) -> str:
    """What a server must share with a client to run its commands (a hex digest)."""
    environment = {k: v for k, v in os.environ.items()
                   if k.startswith(_JVM_ENVIRONMENT) and k != ADDRESS_ENV}
    identity = {"python": sys.executable, "code": _code_digest(), "cwd": os.getcwd(),
                "conf": session_conf(settings, master=settings.spark.master),
                "environment": environment}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def runtime_dir(*, create: bool = False) -> Path:
    """This user's directory of server sockets and logs (with ``create``: made 0700 if
    missing). A client sends its environment to the server it finds there, so the
    directory must be this user's alone.

    Raises:
        ServerError: another user owns it, or others may enter it.
    """
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    directory = Path(base) / f"deltamark-{os.getuid()}"
    if create:
        directory.mkdir(mode=0o700, exist_ok=True)
    try:
        found = directory.lstat()
    except FileNotFoundError:
        return directory
    if (not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid()
            or found.st_mode & 0o077):
        raise ServerError(str(directory), "is not a private directory of this user (owner "
                          f"{found.st_uid}, mode {oct(found.st_mode & 0o777)}); remove it")
    return directory


def socket_path(server_key: str, *, create: bool = False) -> Path:
    """Where the server with ``server_key`` listens (``create``: its directory too)."""
    return runtime_dir(create=create) / f"{server_key}.sock"


def send(connection: socket.socket, message: Mapping[str, Any],
         fds: Sequence[int] = ()) -> None:
    """Write one message (a JSON line), with ``fds`` attached."""
    data = (json.dumps(message) + "\n").encode()
    if fds:
        socket.send_fds(connection, [data], list(fds))
    else:
        connection.sendall(data)


class Lines:
    """The messages arriving on a connection, with the file descriptors sent along."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.fds: list[int] = []
        self.closed = False
        self._buffer = b""
        self._pending: deque[dict[str, Any]] = deque()

    def read(self) -> list[dict[str, Any]]:
        """What one receive brings (call it when the connection is readable, or to block):
        whole messages; an empty list and ``closed`` at the end of the connection."""
        try:
            data, fds, _, _ = socket.recv_fds(self.connection, _CHUNK, 8)
        except ConnectionResetError:
            data, fds = b"", []
        self.fds += fds
        if not data:
            self.closed = True
            return []
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line]

    def next(self) -> dict[str, Any] | None:
        """Block for the next message; None at the end of the connection."""
        while not self._pending and not self.closed:
            self._pending.extend(self.read())
        return self._pending.popleft() if self._pending else None


def _code_digest() -> str:
    """deltamark's own source files as they are now (an edited checkout is other code)."""
    roots = [Path(__file__).parents[1], Path(__file__).parents[2] / "state_tables"]
    entries = sorted(f"{p}:{p.stat().st_mtime_ns}:{p.stat().st_size}"
                     for root in roots for p in root.rglob("*.py"))
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()
