"""Using deltamark servers: find or start one, run a command on it, stop it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from framework.config import Settings
from framework.errors import ServerError
from framework.server.wire import (
    ADDRESS_ENV,
    Lines,
    RunningServer,
    ServerStatus,
    key,
    runtime_dir,
    send,
    socket_path,
)

__all__ = ["CommandProcess", "Launcher", "OwnProcesses", "Server", "ServerProcess",
           "driver_memory", "find_server", "launcher", "private_server", "running_servers",
           "spark_gateway", "start_server"]

#: how long a new server gets to answer (it imports deltamark, pyspark and perhaps GX)
START_SECONDS = 120


class CommandProcess(Protocol):
    """A running ``deltamark`` command: wait for it, signal it (as a ``subprocess.Popen``)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, signum: int) -> None: ...


class Launcher(Protocol):
    """Where ``deltamark`` commands run: a server's forks, or processes of their own."""

    def run(self, argv: Sequence[str], *, env: Mapping[str, str],
            cwd: str | os.PathLike[str], stdin: int, stdout: int,
            stderr: int) -> CommandProcess: ...


class OwnProcesses:
    """Each command in a Python process of its own (``Launcher``): on Spark Connect, whose
    clients start in about a second with no JVM, a server would save nothing."""

    def run(self, argv: Sequence[str], *, env: Mapping[str, str],
            cwd: str | os.PathLike[str], stdin: int, stdout: int,
            stderr: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "framework", *argv], env=env, cwd=cwd,
                                stdin=stdin, stdout=stdout, stderr=stderr,
                                start_new_session=True)


class ServerProcess:
    """A command a server forked for this client: wait for it, signal it (as a
    ``subprocess.Popen``; its pid is the leader of its own process group)."""

    def __init__(self, args: Sequence[str], *, address: Path, connection: socket.socket,
                 lines: Lines, pid: int):
        self.args, self.address, self.pid = list(args), address, pid
        self.returncode: int | None = None
        self._connection, self._lines = connection, lines

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (negative: the signal that ended it).

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
            ServerError: the server ended first.
        """
        if self.returncode is not None:
            return self.returncode
        self._connection.settimeout(timeout)
        try:
            message = self._lines.next()
        except TimeoutError:
            raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        finally:
            self._connection.settimeout(None)
        if message is None or "exit" not in message:
            raise ServerError(str(self.address), f"ended while command {self.pid} ran "
                              f"(deltamark {' '.join(self.args)})")
        self.returncode = int(message["exit"])
        self._connection.close()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the command's process group (nothing once it ended)."""
        if self.returncode is None:
            with contextlib.suppress(OSError):
                send(self._connection, {"op": "signal", "signal": int(signum)})


class Server:
    """A running deltamark server, at ``address`` (its socket)."""

    def __init__(self, address: Path):
        self.address = address

    def status(self) -> ServerStatus:
        """What it runs: its key, pid, working directory, JVM and commands.

        Raises:
            ServerError: it does not answer.
        """
        return cast(ServerStatus, self._ask({"op": "status"}))  # the server's _status

    def run(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | os.PathLike[str],
            stdin: int, stdout: int, stderr: int) -> ServerProcess:
        """Fork ``deltamark ARGV`` on the server, as it would run here: with ``env``, in
        ``cwd``, reading and writing the given file descriptors.

        Raises:
            ServerError: the server does not answer or refuses (it is stopping).
        """
        connection = self._connect()
        lines = Lines(connection)
        send(connection, {"op": "run", "argv": list(argv), "env": dict(env),
                          "cwd": os.fspath(cwd)}, fds=(stdin, stdout, stderr))
        answer = lines.next()
        if answer is None or "pid" not in answer:
            connection.close()
            raise ServerError(str(self.address), (answer or {}).get(
                "error", "closed the connection") + "; run again")
        return ServerProcess(argv, address=self.address, connection=connection, lines=lines,
                             pid=int(answer["pid"]))

    def stop(self, *, now: bool = False) -> ServerStatus:
        """Stop it once its commands end (``now``: kill them)."""
        return cast(ServerStatus, self._ask({"op": "stop", "now": now}))

    def _ask(self, message: Mapping[str, Any], *, timeout: float | None = None
             ) -> dict[str, Any]:
        with contextlib.closing(self._connect()) as connection:
            connection.settimeout(timeout)
            send(connection, message)
            try:
                answer = Lines(connection).next()
            except TimeoutError:
                raise ServerError(str(self.address), f"did not answer within {timeout:g} s"
                                  ) from None
        if answer is None:
            raise ServerError(str(self.address), "closed the connection without answering")
        return answer

    def _connect(self) -> socket.socket:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(str(self.address))
        except OSError as exc:
            connection.close()
            raise ServerError(str(self.address), f"does not answer ({exc.strerror or exc})"
                              ) from exc
        return connection


def find_server(settings: Settings) -> Server | None:
    """The kept server that can run this process's commands (same Spark conf, environment,
    working directory and code), if one is running; never in a command a server forked
    (that command is the run)."""
    if (os.environ.get(ADDRESS_ENV) or settings.spark.remote_url()
            or not any(runtime_dir().glob("*.sock"))):
        return None  # (glob finds nothing in a directory that does not exist)
    path = socket_path(key(settings))
    if not path.exists():
        return None
    server = Server(path)
    try:
        server.status()
    except ServerError:  # it died without removing its socket
        return None
    return server


def running_servers() -> list[RunningServer]:
    """The status of every server of this user that answers."""
    found: list[RunningServer] = []
    for path in sorted(runtime_dir().glob("*.sock")):
        with contextlib.suppress(ServerError):
            found.append({"socket": str(path), **Server(path).status()})
    return found


def start_server(settings: Settings, *, idle_minutes: float, memory: str | None = None
                 ) -> tuple[Server, bool]:
    """Start a kept server for this process's settings, environment and working directory
    (logging to ``<socket>.log``), unless one runs: the server, and whether it is new.

    Raises:
        ServerError: it did not come up; the message ends with its log.
    """
    if settings.spark.remote_url():
        raise ServerError(settings.spark.remote_url() or "", "a deltamark server keeps a Spark "
                          "JVM warm, and these settings run on Spark Connect, whose server "
                          "is already warm: run without one")
    if (running := find_server(settings)) is not None:
        return running, False
    path = socket_path(key(settings), create=True)
    log = path.with_suffix(".log")
    with open(log, "ab") as output:
        process = subprocess.Popen(
            _command(settings, path, memory=memory or driver_memory(settings, jobs=2),
                     extra=["--idle-minutes", str(idle_minutes)]),
            stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True)
    return _ready(Server(path), process, log), True


def launcher(settings: Settings, *, jobs: int) -> contextlib.AbstractContextManager[Launcher]:
    """Where a workflow's commands run: the kept server for ``settings`` if one runs,
    else a private one whose JVM has the memory of ``jobs`` JVMs; on Spark Connect,
    processes of their own."""
    if settings.spark.remote_url():
        return contextlib.nullcontext(OwnProcesses())
    if (kept := find_server(settings)) is not None:
        return contextlib.nullcontext(kept)
    return private_server(settings, memory=driver_memory(settings, jobs=jobs))


@contextlib.contextmanager
def private_server(settings: Settings, *, memory: str) -> Iterator[Server]:
    """A server of this process's own for the block (a workflow run's): it ends with the
    block, or with this process."""
    with tempfile.TemporaryDirectory(prefix="deltamark-server-") as scratch:
        path, log = Path(scratch) / "server.sock", Path(scratch) / "server.log"
        with open(log, "wb") as output:
            process = subprocess.Popen(
                _command(settings, path, memory=memory, extra=["--private"]),
                stdin=subprocess.PIPE, stdout=output, stderr=output, start_new_session=True)
        try:
            yield _ready(Server(path), process, log)
        finally:
            assert process.stdin is not None
            process.stdin.close()  # it stops at the end of its input
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def spark_gateway() -> dict[str, Any]:
    """In a command a server forked: its JVM's gateway (port, secret and the tag for this
    command's Spark jobs), started if need be.

    Raises:
        ServerError: the server could not start its JVM (the message says why).
    """
    address = os.environ[ADDRESS_ENV]
    answer = Server(Path(address))._ask({"op": "spark", "pid": os.getpid()})
    if "error" in answer:
        raise ServerError(address, f"its Spark did not start: {answer['error']}")
    return answer


def driver_memory(settings: Settings, *, jobs: int) -> str:
    """The driver memory of a JVM that runs ``jobs`` jobs at once: as much as ``jobs``
    JVMs of the settings' ``spark.driver.memory`` (Spark's default 1g) would have."""
    given = settings.spark.conf.get("spark.driver.memory", "1g")
    found = re.fullmatch(r"(\d+)([kmgt]?)b?", given.strip().lower())
    if found is None:  # Spark will say what is wrong with it
        return given
    units = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20}
    return f"{max(1, round(int(found[1]) * units[found[2]] * max(1, jobs)))}m"


def _command(settings: Settings, path: Path, *, memory: str, extra: Sequence[str]
             ) -> list[str]:
    return [sys.executable, "-m", "framework.server.process", "--socket", str(path),
            "--conf-dir", str(settings.conf_dir), "--state-root", str(settings.state_root),
            "--driver-memory", memory, *extra]


def _ready(server: Server, process: subprocess.Popen[bytes], log: Path) -> Server:
    """``server`` once it answers (it preloads first)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if server.address.exists():
            with contextlib.suppress(ServerError):
                server._ask({"op": "status"}, timeout=max(0.1, deadline - time.monotonic()))
                return server
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
    raise ServerError(str(server.address), f"did not start (exit {process.poll()}): {tail}")
