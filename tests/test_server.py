"""deltamark servers: a workflow run's jobs share one JVM, each in a process and a Spark
session of its own; a kept server runs deltamark run and workflows; what goes wrong in
one command stays there."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from framework.config import Settings
from framework.errors import ServerError
from framework.server import find_server, running_servers, start_server
from framework.server.wire import runtime_dir
from framework.workflows import run_workflow


@pytest.fixture
def runtime(monkeypatch):
    """A runtime directory of the test's own: it sees no other server (a short path: a
    Unix socket's must be under ~100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="dm-", dir="/tmp") as directory:
        monkeypatch.setenv("XDG_RUNTIME_DIR", directory)
        yield Path(directory)
        if left := running_servers():  # what a failing test left
            subprocess.run([sys.executable, "-m", "framework", "server", "stop", "--all",
                            "--now"], capture_output=True)
            for server in left:
                _wait_gone(server["pid"])


@pytest.fixture
def project(ws, monkeypatch):
    monkeypatch.chdir(ws.root)
    (ws.conf / "workflows").mkdir()
    return ws


def declare(ws, name, jobs, triggers):
    (ws.conf / "workflows" / f"{name}.yaml").write_text(
        yaml.safe_dump({"jobs": jobs, "triggers": triggers}))


def seen(ws, job):
    return json.loads((ws.root / f"{job}.json").read_text())


def chain(*jobs, state="SUCCEEDED"):
    return [{"start": [jobs[0]]}] + [{"when": {"all": [{before: state}]}, "start": [after]}
                                     for before, after in itertools.pairwise(jobs)]


def test_a_workflow_run_starts_spark_once_and_each_job_has_its_own_session(project, spark):
    ws = project
    for job in "abc":
        ws.declare(name=job, cls="SparkProbe", out=str(ws.root))
    declare(ws, "three", {j: {} for j in "abc"}, chain("a", "b", "c"))
    report = run_workflow(ws.settings, "three")
    assert [n.state for n in report.nodes] == ["SUCCEEDED"] * 3, report.nodes
    jvms = {seen(ws, j)["jvm"] for j in "abc"}
    assert len(jvms) == 1  # one JVM for the three, one Spark application
    assert len({seen(ws, j)["app"] for j in "abc"}) == 1
    assert jvms != {spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()}
    for job in "bc":  # what the job before set in its session is not in this one's
        assert seen(ws, job)["partitions"] == "8"
        assert seen(ws, job)["views"] == []
    # what a job held in the JVM (its session, its DataFrames) went with it
    assert seen(ws, "c")["jvm_objects"] <= seen(ws, "b")["jvm_objects"] + 5
    assert not _alive(jvms.pop())  # the run's server stopped its JVM at the end
    runs = [ws.store.last_run(j) for j in "abc"]
    assert [r.status for r in runs] == ["succeeded"] * 3


def test_a_job_that_kills_the_jvm_or_stops_spark_fails_alone(project):
    ws = project
    ws.declare(name="a", cls="SparkProbe", out=str(ws.root), stop="true")
    ws.declare(name="b", cls="SparkProbe", out=str(ws.root))
    ws.declare(name="c", cls="SparkProbe", out=str(ws.root), kill_jvm="true")
    ws.declare(name="d", cls="SparkProbe", out=str(ws.root))
    declare(ws, "rough", {j: {} for j in "abcd"},
            [*chain("a", "b", "c"), {"when": {"all": [{"c": "FAILED"}]}, "start": ["d"]}])
    states = {n.job: n.state for n in run_workflow(ws.settings, "rough").nodes}
    assert states == {"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "FAILED", "d": "SUCCEEDED"}
    # a's spark.stop() left the shared Spark running for b; after c killed the JVM, d got
    # a new one
    assert seen(ws, "a")["jvm"] == seen(ws, "b")["jvm"] != seen(ws, "d")["jvm"]
    assert seen(ws, "a")["app"] == seen(ws, "b")["app"]  # the same SparkContext, not a new one
    assert ws.store.last_run("c").status == "failed"


def test_a_timed_out_job_s_spark_jobs_are_cancelled(project):
    ws = project
    ws.declare(name="slow", cls="SparkProbe", out=str(ws.root), busy_s="120")
    ws.declare(name="after", cls="SparkProbe", out=str(ws.root), wait_idle="true")
    declare(ws, "cancel", {"slow": {"timeout_minutes": 0.2}, "after": {}},
            chain("slow", "after", state="TIMEOUT"))
    started = time.monotonic()
    states = {n.job: n.state for n in run_workflow(ws.settings, "cancel").nodes}
    assert states == {"slow": "TIMEOUT", "after": "SUCCEEDED"}
    after = seen(ws, "after")
    assert after["active_jobs"] == []  # slow's tasks (120 s of sleep) were cancelled
    assert after["waited_s"] < 15
    assert time.monotonic() - started < 90


@pytest.mark.compat
def test_a_kept_server_runs_deltamark_run_and_workflows(project, runtime):
    ws = project
    ws.declare(name="copy", cls="CopyFiles")
    ws.declare(name="probe", cls="SparkProbe", out=str(ws.root))
    declare(ws, "one", {"probe": {}}, chain("probe"))

    started = _cli(ws, "server", "start", "--idle-minutes", "5")
    assert "deltamark server started" in started.stdout
    assert "already running" in _cli(ws, "server", "start").stdout
    server = find_server(ws.settings)
    assert server is not None and server.status()["jvm_pid"] is None  # lazily started

    ws.land(rows=3)
    first = _cli(ws, "run", "copy", "--json")
    assert json.loads(first.stdout.splitlines()[-1])["status"] == "succeeded"
    assert "starting the run" in first.stderr  # its log lines reach this terminal
    again = _cli(ws, "run", "copy")
    assert "skipped run 2" in again.stdout
    assert ws.ids() == [100, 101, 102]
    workflow = _cli(ws, "workflow", "run", "one")
    assert "probe" in workflow.stdout and "SUCCEEDED" in workflow.stdout

    status = json.loads(_cli(ws, "server", "status", "--json").stdout)
    assert [(s["this"], s["commands_run"], s["jvm_starts"]) for s in status] == [
        (True, 3, 1)]
    assert seen(ws, "probe")["jvm"] == status[0]["jvm_pid"]  # the workflow used it too

    # another working directory would resolve relative paths elsewhere: not its server
    elsewhere = _cli(ws, "server", "status", cwd=ws.root / "landing")
    assert "*" not in elsewhere.stdout
    assert "stops" in _cli(ws, "server", "stop").stdout
    _wait_gone(status[0]["pid"])
    assert not _alive(status[0]["jvm_pid"])
    assert _cli(ws, "server", "status").stdout.strip() == "(no rows)"


def test_a_signal_to_the_client_reaches_its_command(project, runtime):
    ws = project
    ws.declare(name="slow", cls="Slow", started_flag=str(ws.root / "started"), sleep_s="60")
    ws.land(rows=1)
    _cli(ws, "server", "start", "--idle-minutes", "5")
    client = _start(ws, "run", "slow")
    _wait_for(lambda: (ws.root / "started").exists(), client)
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=30) == 128 + signal.SIGTERM
    server = find_server(ws.settings)
    assert server is not None
    _wait_for(lambda: not server.status()["commands"], client)
    stopped = ws.store.last_run("slow")  # recorded; the next run recovers what it landed
    assert stopped.status == "failed" and "RunStopped: stopped by SIGTERM" in stopped.error
    _cli(ws, "server", "stop", "--now")


def test_a_client_that_goes_away_takes_its_command_with_it(project, runtime):
    ws = project
    ws.declare(name="slow", cls="Slow", started_flag=str(ws.root / "started"), sleep_s="60")
    declare(ws, "slow_flow", {"slow": {}}, chain("slow"))
    ws.land(rows=1)
    _cli(ws, "server", "start", "--idle-minutes", "5")
    server = find_server(ws.settings)
    assert server is not None
    client = _start(ws, "run", "slow")
    _wait_for(lambda: (ws.root / "started").exists(), client)
    command = server.status()["commands"][0]["pid"]
    client.kill()  # SIGKILL: it cannot pass anything on
    _wait_gone(command)
    assert not server.status()["commands"]
    # a request that is not ours is dropped; the server goes on
    for stranger_says in (b"GET / HTTP/1.1\r\n\r\n\n", b'{"op": "run"}\n',
                          b'{"op": "signal", "signal": "TERM"}\n', b'{"op": "fork"}\n'):
        with socket.socket(socket.AF_UNIX) as stranger:
            stranger.connect(str(server.address))
            stranger.sendall(stranger_says)
            assert b"bad request" in stranger.recv(200) or stranger_says.startswith(b"GET")
    assert server.status()["commands_run"] == 1
    _cli(ws, "server", "stop", "--now")

    # a workflow run killed the same way leaves neither its server nor its job behind
    (ws.root / "started").unlink()
    workflow = _start(ws, "workflow", "run", "slow_flow")
    _wait_for(lambda: (ws.root / "started").exists(), workflow)
    descendants = _descendants(workflow.pid)
    workflow.kill()
    for pid in descendants:
        _wait_gone(pid)


def test_the_socket_directory_must_be_private(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    shared = tmp_path / f"deltamark-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(ServerError) as exc:
        runtime_dir()
    with pytest.raises(ServerError):  # nor is a server there used
        find_server(Settings())
    assert exc.value.where == str(shared) and "is not a private directory" in str(exc.value)


def test_a_server_that_cannot_start_says_why(ws, runtime, monkeypatch):
    monkeypatch.chdir(ws.root)
    (ws.conf / "deltamark.yaml").write_text("spark: [not, a, mapping]\n")
    good = ws.settings  # loaded before the conf broke: the server reads the broken one
    with pytest.raises(ServerError, match=r"did not start \(exit 1\).*spark"):
        start_server(good, idle_minutes=1)


def _cli(ws, *args, cwd=None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "framework", "--conf-dir", str(ws.conf),
                           *args], cwd=cwd or ws.root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def _start(ws, *args) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "framework", "--conf-dir", str(ws.conf),
                             *args], cwd=ws.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children] + [d for c in children for d in _descendants(int(c))]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"


def _wait_gone(pid: int) -> None:
    _wait_for(lambda: not _alive(pid))


def _wait_for(condition, process: subprocess.Popen | None = None, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"ended early: {process.communicate()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_what_a_server_preloads_is_where_it_names_it():
    # a module moved without its preload line would cost each forked command its import
    # again, silently (the old path imports the new module, with a warning)
    import importlib.util

    from framework.common.moved import MOVED
    from framework.server.process import PRELOAD, PRELOAD_FOR_JOBS

    named = (*PRELOAD, *PRELOAD_FOR_JOBS)
    assert not [m for m in named if m in MOVED or importlib.util.find_spec(m) is None]
