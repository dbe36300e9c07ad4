"""deltamark servers: a workflow run's jobs share one JVM, each in a process and a Spark
session of its own; what goes wrong in one command stays there."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from framework.config import Settings
from framework.errors import ServerError
from framework.server import find_server
from framework.server.wire import runtime_dir
from framework.workflows import run_workflow


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
                                     for before, after in zip(jobs, jobs[1:], strict=False)]


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
            chain("a", "b", "c") + [{"when": {"all": [{"c": "FAILED"}]}, "start": ["d"]}])
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
