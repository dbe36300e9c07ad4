"""The deltamark server process: one Spark JVM, shared by the deltamark commands it forks.

    python -m framework.server.process --socket PATH [--conf-dir DIR] [--state-root ROOT]
        [--driver-memory SIZE] [--idle-minutes N] [--private]

It imports deltamark and pyspark once, and great-expectations (seconds) at start, or for
a private server when its JVM starts (then jobs run, and the JVM takes longer). It serves
requests on its socket with one thread and no Spark of its own, so that it can fork:

- ``run``: fork a deltamark command with the client's arguments, environment, working
  directory and stdio, in a session of its own; answer its pid, then how it ended. A
  signal the client sends goes to the command's process group; a client that goes away
  takes its command with it.
- ``spark``, from a command it forked that needs Spark: the gateway of the server's JVM.
  A child of the server owns the JVM (started on the first such request, again after a
  JVM died). Each command tags its Spark jobs; when it ends by a signal or an error, its
  jobs still running are cancelled, and when no command is attached, cached data is
  dropped.
- ``status``; ``stop``: after the running commands end (``now``: kill them).

A private server (a workflow run's) ends when its stdin closes (its parent ended); a kept
one (``deltamark server start``) after ``--idle-minutes`` without commands.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import select
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from framework.config import Settings, load_settings
from framework.errors import DeltamarkError, ServerError
from framework.server.wire import ADDRESS_ENV, Lines, ServerStatus, key, send

if TYPE_CHECKING:
    import io

#: the module of the commands a server runs: the deltamark executable's Typer ``app``,
#: imported by name in each command as the executable imports it (the CLI sits above the
#: server: it starts servers and sends them its commands)
COMMANDS = "framework.cli.commands"
#: what every forked command would import: imported once, here
PRELOAD = (COMMANDS, "framework.run.runner", "framework.spark.session",
           "framework.delta.native", "framework.delta.embedded", "framework.sources.files",
           "framework.sources.jdbc", "framework.sources.delta",
           "framework.sources.files.listed_reads", "framework.server.session", "pyspark.sql",
           "pyspark.sql.functions")
#: what commands that run jobs with data-quality rules import (seconds)
PRELOAD_FOR_JOBS = ("great_expectations",)

#: a command's Spark jobs carry this tag followed by its pid
JOB_TAG = "deltamark-command-"


@dataclass(frozen=True)
class _Request:
    """What a client asks to run: deltamark's arguments, with its environment, in its
    working directory."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> _Request:
        """Raises KeyError, TypeError or ValueError when ``message`` is not one."""
        argv, env, cwd = message["argv"], message["env"], message["cwd"]
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                and isinstance(env, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
                and isinstance(cwd, str)):
            raise TypeError("argv: a list of strings, env: strings by name, cwd: a string")
        return cls(tuple(argv), env, cwd)


@dataclass
class _Command:
    """A deltamark command the server forked, and the client waiting for it."""

    pid: int
    client: socket.socket
    argv: Sequence[str]
    started: float = field(default_factory=time.time)
    attached: bool = False  # asked for Spark


#: answers a client (``Server._reply``)
Reply = Callable[[socket.socket, Mapping[str, Any]], None]


@dataclass
class _Jvm:
    """The child that owns the JVM: its channel, and the commands waiting for it."""

    pid: int
    channel: socket.socket
    lines: Lines
    gateway: Mapping[str, Any] | None = None
    waiting: list[tuple[socket.socket, int]] = field(default_factory=list)

    @classmethod
    def start(cls, settings: Settings, driver_memory: str | None,
              let_go: Callable[[], None]) -> _Jvm:
        """Fork the JVM's owner (``let_go``: what a child of the server first does)."""
        ours, theirs = socket.socketpair()

        def own() -> int:
            ours.close()
            return _own_jvm(theirs, settings, driver_memory=driver_memory)

        pid = _fork(own, let_go)
        theirs.close()
        _log(f"starting the JVM (owner {pid})")
        return cls(pid, ours, Lines(ours))

    def lost(self) -> bool:
        """Whether the JVM it announced is gone (before the owner noticed)."""
        return self.gateway is not None and not _alive(self.gateway["jvm_pid"])

    def read(self, reply: Reply) -> None:
        """What the owner said: its gateway (or an error), for the commands waiting."""
        for message in self.lines.read():
            if "gateway" in message:
                self.gateway = message["gateway"]
                _log("the JVM is ready")
            for client, pid in self.waiting:
                reply(client, {**message["gateway"], "tag": f"{JOB_TAG}{pid}"}
                      if "gateway" in message else message)
            self.waiting.clear()

    def ended(self, reply: Reply) -> None:
        """The owner ended (all it said read): the commands waiting are told."""
        _log("the JVM ended")
        for client, _ in self.waiting:
            reply(client, {"error": "the JVM ended before it was ready; see the server's log"})
        self.channel.close()

    def send(self, message: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):  # it is ending; reaped soon
            send(self.channel, message)

    def stop(self) -> None:
        self.channel.close()  # the owner stops Spark at the end of its channel
        deadline = time.time() + 30
        while time.time() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)


class Server:
    """The request loop (see the module docstring)."""

    def __init__(self, settings: Settings, address: Path, *, driver_memory: str | None,
                 idle_minutes: float, private: bool):
        self.settings, self.address = settings, address
        self.driver_memory, self.idle_minutes, self.private = driver_memory, idle_minutes, private
        self.key = key(settings)
        self.started = time.time()
        self.commands: dict[int, _Command] = {}
        self.jvm: _Jvm | None = None
        self.jvm_starts = self.commands_run = 0
        self.stopping = self.terminated = False
        self.idle_since = self.started
        self.selector = selectors.DefaultSelector()
        self.clients: dict[int, Lines] = {}  # by file descriptor
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.wakeup_r, self.wakeup_w = os.pipe()

    def serve(self) -> None:
        """Listen, preload, then answer requests until stopped.

        Raises:
            ServerError: another server answers at this address.
        """
        if _answers(self.address):
            raise ServerError(str(self.address), "another server answers there")
        self.address.unlink(missing_ok=True)  # a stale socket of a server that died
        self.listener.bind(str(self.address))
        self.listener.listen(64)
        # clients connecting meanwhile wait in the backlog
        _preload(PRELOAD if self.private else (*PRELOAD, *PRELOAD_FOR_JOBS))
        self.idle_since = time.time()
        for fd in (self.wakeup_r, self.wakeup_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "terminated", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, self._reap)
        if self.private:  # the parent holds our stdin: its end is ours
            self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, self._parent)
        _log(f"serving on {self.address} (key {self.key}, pid {os.getpid()})")
        while not (self.stopping and not self.commands):
            for selected, _ in self.selector.select(self._timeout()):
                selected.data(selected.fileobj)
            if self.terminated and not self.stopping:
                self._stop(now=False)
            if (not self.stopping and self.idle_minutes and not self.commands
                    and time.time() - self.idle_since > self.idle_minutes * 60):
                _log(f"idle for {self.idle_minutes:g} minutes")
                self._stop(now=False)
        if self.jvm is not None:
            self.jvm.stop()
        _log("stopped")

    # -- requests ---------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        client, _ = listener.accept()
        self.selector.register(client, selectors.EVENT_READ, self._request)
        self.clients[client.fileno()] = Lines(client)

    def _request(self, client: socket.socket) -> None:
        lines = self.clients[client.fileno()]
        try:
            messages = lines.read()
        except ValueError:  # not JSON: not a client of ours
            messages, lines.closed = [], True
        for message in messages:
            try:
                self._answer(client, message, lines)
            except (KeyError, TypeError, ValueError) as exc:  # not a request of ours
                self._reply(client, {"error": f"bad request ({type(exc).__name__}: {exc})"})
                lines.closed = True
                break
        if lines.closed:
            for fd in lines.fds:
                os.close(fd)
            self._disconnect(client)

    def _answer(self, client: socket.socket, message: Mapping[str, Any], lines: Lines) -> None:
        op = message["op"]
        if op == "run":
            fds, lines.fds = lines.fds, []
            self._run(client, _Request.of(message), fds)
        elif op == "signal":
            self._signal(client, int(message["signal"]))
        elif op == "spark":
            self._spark(client, int(message["pid"]))
        elif op == "status":
            self._reply(client, self._status())
        elif op == "stop":
            self._stop(now=bool(message.get("now")))
            self._reply(client, {"stopping": True, "commands": len(self.commands)})
        else:
            raise ValueError(f"no operation {op!r}")

    def _run(self, client: socket.socket, request: _Request, fds: list[int]) -> None:
        if self.stopping or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            self._reply(client, {"error": "the server is stopping" if self.stopping else
                                 "a run request carries stdin, stdout and stderr"})
            return
        pid = _fork(lambda: _command(request, fds, self.address), self._become_child)
        for fd in fds:
            os.close(fd)
        self.commands[pid] = _Command(pid, client, request.argv)
        self.commands_run += 1
        send(client, {"pid": pid})
        _log(f"command {pid}: deltamark {' '.join(request.argv)}")

    def _signal(self, client: socket.socket, signum: int) -> None:
        for command in self.commands.values():
            if command.client is client:
                _signal_group(command.pid, signum)

    def _spark(self, client: socket.socket, pid: int) -> None:
        if pid in self.commands:
            self.commands[pid].attached = True
        if self.jvm is not None and self.jvm.lost():  # its owner has not noticed yet
            os.kill(self.jvm.pid, signal.SIGKILL)
            os.waitpid(self.jvm.pid, 0)
            self._jvm_ended()
        if self.jvm is None:
            self.jvm = _Jvm.start(self.settings, self.driver_memory, self._become_child)
            self.jvm_starts += 1
            self.selector.register(self.jvm.channel, selectors.EVENT_READ, self._from_jvm)
            _preload(PRELOAD_FOR_JOBS)  # while it starts
        if self.jvm.gateway is None:
            self.jvm.waiting.append((client, pid))
        else:
            self._reply(client, {**self.jvm.gateway, "tag": f"{JOB_TAG}{pid}"})

    def _status(self) -> ServerStatus:
        return {"key": self.key, "pid": os.getpid(), "cwd": os.getcwd(),
                "conf_dir": str(self.settings.conf_dir.resolve()), "private": self.private,
                "started_at": datetime.fromtimestamp(self.started, UTC).isoformat(),
                "idle_minutes": self.idle_minutes, "driver_memory": self.driver_memory,
                "jvm_pid": self.jvm.gateway["jvm_pid"] if self.jvm and self.jvm.gateway
                else None, "jvm_starts": self.jvm_starts,
                "commands_run": self.commands_run, "stopping": self.stopping,
                "commands": [{"pid": c.pid, "argv": list(c.argv), "attached": c.attached,
                              "seconds": round(time.time() - c.started, 1)}
                             for c in self.commands.values()]}

    def _reply(self, client: socket.socket, message: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):  # it went away; handled when its end is read
            send(client, message)

    def _disconnect(self, client: socket.socket) -> None:
        for command in self.commands.values():
            if command.client is client:  # nobody waits for it any more
                _log(f"command {command.pid}: its client went away; killing it")
                _signal_group(command.pid, signal.SIGKILL)
        self.selector.unregister(client)
        self.clients.pop(client.fileno(), None)
        client.close()

    def _parent(self, stdin: int) -> None:
        if not os.read(stdin, 4096):
            self.selector.unregister(stdin)
            self._stop(now=True)

    def _stop(self, *, now: bool) -> None:
        if not self.stopping:
            self.stopping = True
            self.selector.unregister(self.listener)
            self.listener.close()
            self.address.unlink(missing_ok=True)
            _log(f"stopping ({len(self.commands)} commands running)")
        if now:
            for pid in self.commands:
                _signal_group(pid, signal.SIGKILL)

    def _timeout(self) -> float | None:
        if self.stopping or not self.idle_minutes:
            return None
        return max(0.0, self.idle_since + self.idle_minutes * 60 - time.time()) + 0.1

    # -- children ---------------------------------------------------------------------

    def _reap(self, wakeup: int) -> None:
        while True:  # drain the wake-up bytes of signals
            try:
                if not os.read(wakeup, 512):
                    break
            except BlockingIOError:
                break
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.jvm is not None and pid == self.jvm.pid:
                self._jvm_ended()
            elif (command := self.commands.pop(pid, None)) is not None:
                self._ended(command, os.waitstatus_to_exitcode(status))

    def _ended(self, command: _Command, code: int) -> None:
        _log(f"command {command.pid}: exit {code}")
        self._reply(command.client, {"exit": code})
        if not self.commands:
            self.idle_since = time.time()
        if self.jvm is None or self.jvm.gateway is None or not command.attached:
            return
        if code != 0:  # what it left running in the JVM stops with it
            self.jvm.send({"cancel": f"{JOB_TAG}{command.pid}"})
        if not any(c.attached for c in self.commands.values()):
            self.jvm.send({"clear_cache": True})

    def _from_jvm(self, channel: socket.socket) -> None:
        assert self.jvm is not None and channel is self.jvm.channel
        self.jvm.read(self._reply)
        if self.jvm.lines.closed:
            self.selector.unregister(channel)

    def _jvm_ended(self) -> None:
        assert self.jvm is not None
        while not self.jvm.lines.closed:  # what it said before it ended (its end is closed)
            self._from_jvm(self.jvm.channel)
        self.jvm.ended(self._reply)
        self.jvm = None

    def _become_child(self) -> None:
        """In a forked child: let go of the server's sockets and signal handling."""
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()  # closes the epoll descriptor only (never unregister here)
        for client in self.clients.values():
            client.connection.close()
        if not self.stopping:
            self.listener.close()
        if self.jvm is not None:
            self.jvm.channel.close()
        os.close(self.wakeup_r)
        os.close(self.wakeup_w)


def _fork(child: Callable[[], int], let_go: Callable[[], None]) -> int:
    """Fork: the child runs ``let_go`` (of the server's sockets and signals), then ``child``,
    and exits with its code. Returns the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            let_go()
            code = child()
        finally:
            os._exit(code)
    return pid


def _command(request: _Request, fds: Sequence[int], address: Path) -> int:
    """In a forked child: run the deltamark command of ``request`` as its own process
    would, with ``fds`` as stdin, stdout and stderr. Returns its exit code."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    # cast: the process's own stdout (on fd 1), a TextIOWrapper, not one a caller replaced
    cast("io.TextIOWrapper", sys.stdout).reconfigure(line_buffering=sys.stdout.isatty())
    os.environ.clear()
    os.environ.update(request.env)
    os.environ[ADDRESS_ENV] = str(address)
    sys.argv = ["deltamark", *request.argv]
    from framework.server import session
    from framework.spark.session import sessions_from

    sessions_from(session.session_in_server)
    code: int | str | None = 0
    try:
        os.chdir(request.cwd)
        importlib.import_module(COMMANDS).app(args=list(request.argv), prog_name="deltamark")
    except SystemExit as ended:
        code = ended.code
    except BaseException:  # noqa: BLE001 - what an uncaught exception would print
        traceback.print_exc()
        code = 1
    finally:  # what the interpreter does at exit, before os._exit
        session.release_session()  # what it held in the server's JVM
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        return 1
    return code or 0


def _own_jvm(channel: socket.socket, settings: Settings, *, driver_memory: str | None) -> int:
    """In a forked child: start the server's Spark, send its gateway, then carry out the
    server's requests until the channel closes (stop Spark) or the JVM dies."""
    from pyspark import SparkContext

    from framework.spark.session import spark_session

    try:
        spark = spark_session(settings, app_name=f"deltamark server {os.getppid()}",
                              conf={"spark.driver.memory": driver_memory} if driver_memory
                              else None)
    except Exception as exc:  # noqa: BLE001 - SparkStartError, or what Spark said
        send(channel, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    gateway = SparkContext._gateway
    assert gateway is not None
    send(channel, {"gateway": {"port": gateway.java_parameters.port,
                               "secret": gateway.java_parameters.auth_token,
                               "jvm_pid": gateway.proc.pid}})
    jvm, lines = gateway.proc, Lines(channel)
    while jvm.poll() is None and not lines.closed:
        if not select.select([channel], [], [], 1.0)[0]:
            continue
        for message in lines.read():
            if "cancel" in message:
                spark.sparkContext.cancelJobsWithTag(message["cancel"])
            elif message.get("clear_cache"):
                spark.catalog.clearCache()
    if jvm.poll() is not None:
        return 1
    spark.stop()
    jvm.stdin.close()  # the gateway exits at the end of its input
    jvm.wait()
    return 0


def _preload(modules: Sequence[str]) -> None:
    import importlib

    from framework.quality.expectations import import_great_expectations

    for module in modules:
        if module == "great_expectations":
            import_great_expectations()  # with its settings
        else:
            importlib.import_module(module)


def _answers(address: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(address))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):  # ended, or not yet in its own group
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _log(message: str) -> None:
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} deltamark server: {message}",
          file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m framework.server.process")
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--conf-dir")
    parser.add_argument("--state-root")
    parser.add_argument("--driver-memory")
    parser.add_argument("--idle-minutes", type=float, default=0)
    parser.add_argument("--private", action="store_true")
    options = parser.parse_args(argv)
    os.environ.pop(ADDRESS_ENV, None)  # this process's Spark is its own
    try:
        settings = load_settings(conf_dir=options.conf_dir, state_root=options.state_root)
        Server(settings, options.socket, driver_memory=options.driver_memory,
               idle_minutes=options.idle_minutes, private=options.private).serve()
    except DeltamarkError as exc:
        _log(f"error: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
