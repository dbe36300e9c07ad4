"""Workflows: validation, a real run (each job its own deltamark process), several triggers
per job, run properties apart from params, timeouts, stop, runs, resume, status, and the
Airflow export run in a real Airflow."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
import yaml
from typer.testing import CliRunner

from framework.cli import app
from framework.errors import ConfigError, JobFailedError, WorkflowError
from framework.glue.script import script_job
from framework.run.runner import run_job
from framework.storage.lease import lease_holder
from framework.workflows import (
    airflow_dag,
    load_workflow,
    resume_workflow,
    run_workflow,
)

DIAMOND = {
    "description": "every kind of trigger",
    "max_concurrency": 2,
    "run_properties": {"region": "eu", "x": "property"},
    "jobs": {"a": {}, "b": {"args": {"fail": "true", "x": "workflow"}}, "c": {}, "d": {},
             "e": {}, "f": {}, "g": {}},
    "triggers": [
        {"name": "start", "start": ["a"]},
        {"name": "after_a", "when": {"all": [{"a": "SUCCEEDED"}]}, "start": ["b", "c"],
         "args": {"x": "trigger"}},
        {"name": "either", "when": {"any": [{"b": "SUCCEEDED"}, {"c": "SUCCEEDED"}]},
         "start": ["d"]},
        {"name": "b_ok", "when": {"all": [{"b": "SUCCEEDED"}]}, "start": ["e"]},
        {"name": "b_failed", "when": {"all": [{"b": "FAILED"}]}, "start": ["f"]},
        {"name": "after_e", "when": {"all": [{"e": "SUCCEEDED"}, {"a": "SUCCEEDED"}]},
         "start": ["g"], "args_from_properties": {"from_a": "a_done", "none": "nope"}},
    ],
}


@pytest.fixture
def project(ws, kept_server):
    """Jobs a to h (tests/support_jobs.py's Step); the workflow runs fork from the module's
    kept server (a server of each run's own is test_server's subject)."""
    for job in "abcdefgh":
        ws.declare(name=job, cls="Step", out=str(ws.root), x="job")
    (ws.conf / "workflows").mkdir()
    return ws


def declare(ws, name, body):
    (ws.conf / "workflows" / f"{name}.yaml").write_text(yaml.safe_dump(body, sort_keys=False))


def received(ws, job):
    return json.loads((ws.root / f"{job}.json").read_text())


def test_validation_reports_every_problem_naming_the_file(project):
    declare(project, "bad", {
        "schedule": "every hour",
        "jobs": {"a": {}, "b": {}, "c": {}, "nope": {}, "h": {"timeout_minutes": 0},
                 "g": {"script": "no/such/script.py"}},
        "triggers": [
            {"start": ["a"]}, {"name": "again", "start": ["b"]},
            {"when": {"all": [{"c": "SUCCEEDED"}]}, "start": ["b"]},
            {"when": {"all": [{"b": "DONE"}]}, "start": ["c"]},
        ]})
    with pytest.raises(ConfigError) as exc:
        load_workflow(project.settings, "bad")
    assert exc.value.path.endswith("workflows/bad.yaml")
    problems = "\n".join(exc.value.problems)
    assert "schedule: 'every hour' is not a cron expression" in problems
    assert "jobs.nope: unknown job" in problems
    assert "jobs.h.timeout_minutes: must be a positive number" in problems
    assert "jobs.g.script: no such file no/such/script.py" in problems
    assert "triggers[3].when: b: 'DONE' is not one of SUCCEEDED, FAILED, TIMEOUT, STOPPED" \
        in problems
    body = {"jobs": {"a": {}, "b": {}, "c": {}, "h": {}}, "triggers": [
        {"start": ["a"]}, {"name": "again", "start": ["b"]},
        {"when": {"all": [{"c": "SUCCEEDED"}]}, "start": ["b"]},
        {"when": {"any": [{"b": "FAILED"}]}, "start": ["c"]}]}
    declare(project, "graph", body)
    with pytest.raises(ConfigError) as exc:
        load_workflow(project.settings, "graph")
    problems = "\n".join(exc.value.problems)
    assert "conflicting start triggers (trigger_0, again)" in problems
    assert "the start trigger and trigger_2 start b" in problems
    assert "cycle b -> c -> b" in problems
    assert "jobs.h: unreachable" in problems


@pytest.mark.compat
def test_a_run_follows_and_any_conditions_skips_branches_and_passes_properties(project):
    declare(project, "diamond", DIAMOND)
    report = run_workflow(project.settings, "diamond", args={"batch": "42"})
    states = {n.job: n.state for n in report.nodes}
    assert states == {"a": "SUCCEEDED", "b": "FAILED", "c": "SUCCEEDED", "d": "SUCCEEDED",
                      "e": "SKIPPED", "f": "SUCCEEDED", "g": "SKIPPED"}
    assert not report.succeeded
    nodes = {n.job: n for n in report.nodes}
    assert "b was told to fail" in nodes["b"].error
    assert nodes["e"].error == "b_ok: b SUCCEEDED can no longer hold"
    assert nodes["g"].trigger == "after_e"
    # precedence: job conf < workflow args < trigger args; a run property named x is apart
    assert received(project, "b")["x"] == "trigger"
    assert received(project, "a")["x"] == "job"
    # run properties: the workflow's, the command line's, and what earlier jobs published
    assert received(project, "d")["_run_properties"] == {
        "region": "eu", "x": "property", "batch": "42", "a_done": "1", "c_done": "1"}
    assert "c_done" not in received(project, "c")["_run_properties"]
    assert "region" not in received(project, "d")  # not a param unless a trigger maps it
    assert received(project, "d")["_workflow"] == ["diamond", report.workflow_run_id]
    assert report.properties["f_done"] == "1"
    # every node's run is a normal deltamark run, recorded as such
    assert nodes["a"].run_id == project.store.last_run("a").run_id
    assert project.store.last_run("b").status == "failed"
    stored = project.store.workflow_run("diamond")
    assert [(n.job, n.state) for n in stored][:3] == [("a", "SUCCEEDED"), ("b", "FAILED"),
                                                       ("c", "SUCCEEDED")]

    # resume: b is fixed; b and all downstream of it run again, a and c are reused
    body = {**DIAMOND, "jobs": {**DIAMOND["jobs"], "b": {"args": {"x": "workflow"}}}}
    declare(project, "diamond", body)
    resumed = resume_workflow(project.settings, report.workflow_run_id)
    states = {n.job: n.state for n in resumed.nodes}
    assert states == {"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "SUCCEEDED", "d": "SUCCEEDED",
                      "e": "SUCCEEDED", "f": "SKIPPED", "g": "SUCCEEDED"}
    assert resumed.succeeded and resumed.resumed_from == report.workflow_run_id
    assert len([r for r in project.store.runs("a")]) == 1  # reused, not re-run
    assert len([r for r in project.store.runs("b")]) == 2
    assert received(project, "g")["_run_properties"]["batch"] == "42"  # the original ones
    assert received(project, "g")["from_a"] == "1" and "none" not in received(project, "g")

    runner = CliRunner()
    shown = runner.invoke(app, ["--conf-dir", str(project.conf), "workflow", "status",
                                "diamond"])
    assert shown.exit_code == 0, shown.output
    assert f"(resumes {report.workflow_run_id})" in shown.output
    assert json.loads(runner.invoke(app, ["--conf-dir", str(project.conf), "workflow",
                                          "status", "diamond", "--run",
                                          report.workflow_run_id, "--json"]).output)[1][
        "state"] == "FAILED"
    with pytest.raises(WorkflowError, match="has no failed, timed-out or stopped job"):
        resume_workflow(project.settings, resumed.workflow_run_id)


def test_a_job_with_two_triggers_runs_once_on_the_first_and_is_skipped_when_neither_can(
        project):
    """(b and c succeeded) or f failed: what one trigger cannot say."""
    def declare_alert(failing):
        declare(project, "alert", {
            "jobs": {"a": {}, "b": {"args": {"fail": str(failing == "b").lower()}}, "c": {},
                     "f": {"args": {"fail": str(failing == "f").lower()}}, "h": {}},
            "triggers": [
                {"name": "start", "start": ["a"]},
                {"name": "after_a", "when": {"all": [{"a": "SUCCEEDED"}]},
                 "start": ["b", "c", "f"]},
                {"name": "both_ok", "when": {"all": [{"b": "SUCCEEDED"}, {"c": "SUCCEEDED"}]},
                 "start": ["h"], "args": {"by": "both_ok"}},
                {"name": "f_failed", "when": {"any": [{"f": "FAILED"}, {"f": "TIMEOUT"}]},
                 "start": ["h"], "args": {"by": "f_failed"}}]})

    declare_alert(failing="b")
    nodes = {n.job: n for n in run_workflow(project.settings, "alert").nodes}
    assert nodes["h"].state == "SKIPPED" and nodes["h"].trigger == "both_ok, f_failed"
    assert nodes["h"].error == ("none of its triggers can fire any more (both_ok: (b SUCCEEDED"
                                " AND c SUCCEEDED); f_failed: (f FAILED OR f TIMEOUT))")
    declare_alert(failing="f")
    nodes = {n.job: n for n in run_workflow(project.settings, "alert").nodes}
    assert (nodes["h"].state, nodes["h"].trigger) == ("SUCCEEDED", "both_ok")  # the first
    assert received(project, "h")["by"] == "both_ok"
    assert [r.status for r in project.store.runs("h")] == ["succeeded"]  # once

    declare(project, "both", {"jobs": {"a": {}, "b": {}}, "triggers": [
        {"start": ["a", "b"]}, {"name": "again", "when": {"all": [{"a": "FAILED"}]},
                                "start": ["b"]}]})
    with pytest.raises(ConfigError, match="the start trigger and again start b"):
        load_workflow(project.settings, "both")


def test_a_workflow_run_is_stopped_listed_and_limited_to_its_concurrent_runs(project):
    declare(project, "long", {
        "jobs": {"h": {"args": {"sleep_s": "300"}}, "a": {}},
        "triggers": [{"start": ["h"]}, {"when": {"all": [{"h": "SUCCEEDED"}]},
                                        "start": ["a"]}]})
    reports = []
    running = threading.Thread(target=lambda: reports.append(
        run_workflow(project.settings, "long")))
    running.start()
    deadline = time.monotonic() + 120
    while not ((nodes := project.store.workflow_run("long"))
               and nodes[0].state == "RUNNING" and project.root.joinpath("h.json").exists()):
        assert time.monotonic() < deadline, "the workflow run did not start h"
        time.sleep(0.2)
    run_id = nodes[0].workflow_run_id
    # a second run is refused while the first holds the only slot (max_concurrent_runs: 1)
    with pytest.raises(WorkflowError, match=f"1 run\\(s\\) in progress \\({run_id}\\)"):
        run_workflow(project.settings, "long")
    listed = CliRunner().invoke(app, ["--conf-dir", str(project.conf), "workflow", "runs",
                                      "long", "--json"])
    assert [(r["workflow_run_id"], r["state"]) for r in json.loads(listed.output)] == [
        (run_id, "RUNNING")]

    started = time.monotonic()
    stopped = CliRunner().invoke(app, ["--conf-dir", str(project.conf), "workflow", "stop",
                                       run_id])
    assert stopped.exit_code == 0, stopped.output
    assert f"workflow long: run {run_id} STOPPED (2 STOPPED)" in stopped.output
    assert time.monotonic() - started < 60
    running.join(timeout=60)
    nodes = {n.job: n for n in reports[0].nodes}
    assert nodes["h"].state == "STOPPED"
    assert nodes["h"].error == "stopped by deltamark workflow stop"
    assert nodes["a"].error == "the workflow run was stopped before it started"
    assert lease_holder(project.settings.state_root, "h") is None  # its lease is released
    stopped = project.store.last_run("h")  # recorded as stopped; nothing moved
    assert stopped.status == "failed" and "stopped by SIGTERM" in stopped.error
    again = CliRunner().invoke(app, ["--conf-dir", str(project.conf), "workflow", "stop",
                                     run_id])
    assert again.exit_code == 1
    assert f"run {run_id} is not running (it is STOPPED); nothing to stop" in again.output
    listed = CliRunner().invoke(app, ["--conf-dir", str(project.conf), "workflow", "runs",
                                      "long"])
    assert run_id in listed.output and "2 STOPPED" in listed.output

    # resume runs both
    declare(project, "long", {
        "jobs": {"h": {}, "a": {}},
        "triggers": [{"start": ["h"]}, {"when": {"all": [{"h": "SUCCEEDED"}]},
                                        "start": ["a"]}]})
    resumed = resume_workflow(project.settings, run_id)
    assert resumed.succeeded and {n.job: n.state for n in resumed.nodes} == {
        "h": "SUCCEEDED", "a": "SUCCEEDED"}
    assert [r.status for r in project.store.runs("h")] == ["failed", "succeeded"]


def test_a_job_past_its_time_limit_times_out_and_a_killed_one_is_stopped(project):
    declare(project, "slow", {
        "jobs": {"h": {"timeout_minutes": 0.05, "args": {"sleep_s": "120"}},
                 "c": {"args": {"kill": "true"}}, "a": {}},
        "triggers": [{"start": ["h", "c"]},
                     {"when": {"all": [{"h": "TIMEOUT"}, {"c": "STOPPED"}]},
                      "start": ["a"]}]})
    runner = CliRunner()
    result = runner.invoke(app, ["--conf-dir", str(project.conf), "workflow", "run", "slow"])
    assert result.exit_code == 1
    assert "h                        TIMEOUT" in result.output
    assert "stopped after its time limit of 0.05 minutes" in result.output
    assert "c                        STOPPED in" in result.output
    assert "stopped by SIGKILL" in result.output
    assert "a                        SUCCEEDED" in result.output


SCENARIOS = {  # the diamond with b failing; with nothing failing; with a failing first
    "failed_middle": DIAMOND,
    "succeeded": {**DIAMOND, "jobs": {**DIAMOND["jobs"], "b": {"args": {"x": "workflow"}}}},
    "failed_first": {**DIAMOND, "jobs": {**DIAMOND["jobs"], "a": {"args": {"fail": "true"}}}},
}
AIRFLOW_STATES = {"success": "SUCCEEDED", "failed": "FAILED", "skipped": "SKIPPED"}


def test_the_airflow_export_decides_as_deltamark_in_a_real_airflow(project, airflow, airflow_home):
    """Each scenario runs twice: with deltamark workflow run, and as the exported DAG in
    Airflow 3 (airflow dags test) on a state root of its own. The same jobs run, fail and
    are skipped, and get the same params and run properties."""
    home = airflow_home
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags")}
    airflow_state = project.root / "airflow_state"
    deltamark = f"{sys.executable} -m framework"
    cli = [sys.executable, "-m", "framework", "--conf-dir", str(project.conf),
           "--state-root", str(airflow_state)]
    # the tasks' deltamark runs fork from a kept server, as on a real Airflow worker
    subprocess.run([*cli, "server", "start", "--idle-minutes", "10"], env=env, check=True,
                   cwd=project.root, capture_output=True)
    try:
        for name, body in SCENARIOS.items():
            declare(project, name, body)
            report = run_workflow(project.settings, name, args={"batch": "42"})
            ours = {n.job: n.state for n in report.nodes}
            seen_here = _received_all(project)
            exported = CliRunner().invoke(app, [
                "--conf-dir", str(project.conf), "--state-root", str(airflow_state),
                "workflow", "export", name, "--deltamark", deltamark, "--workdir",
                str(project.root), "-o", str(home / "dags" / f"{name}.py")])
            assert exported.exit_code == 0, exported.output
            subprocess.run([airflow, "dags", "test", name, "-c", json.dumps({"batch": "42"})],
                           env=env, capture_output=True, timeout=600)
            with sqlite3.connect(home / "airflow.db") as db:
                theirs = {task: AIRFLOW_STATES.get(state, state) for task, state in db.execute(
                    "SELECT task_id, state FROM task_instance WHERE dag_id = ?", (name,))}
            assert theirs == ours, name
            seen_there = _received_all(project)
            assert {p["_workflow"][0] for p in seen_there.values()} == {name}
            workflow = load_workflow(project.settings, name)
            assert _comparable(workflow, seen_there) == _comparable(workflow, seen_here), name
        # the old export ran f here: Airflow's one_failed/all_failed fire on upstream_failed
        assert theirs["f"] == "SKIPPED" and theirs["b"] == "SKIPPED"
    finally:
        subprocess.run([*cli, "server", "stop", "--now"], env=env, cwd=project.root,
                       capture_output=True)


def _comparable(workflow, received: dict[str, dict]) -> dict[str, dict]:
    """What each job received, but the workflow run's id and the properties of jobs that
    need not have ended before it started (not upstream through 'all' conditions): whether
    those had is a matter of timing, in deltamark as in Airflow (an 'any' trigger fires in
    deltamark at its first condition, in Airflow once all its jobs ended)."""
    def upstream(job):
        triggers = workflow.triggers_of(job)
        direct = {c.job for t in triggers for c in t.conditions} if len(triggers) == 1 \
            and triggers[0].logical == "all" else set()
        return direct.union(*(upstream(j) for j in direct))

    return {job: {**{k: v for k, v in params.items() if k != "_workflow"},
                  "_run_properties": {k: v for k, v in params["_run_properties"].items()
                                      if not k.endswith("_done")
                                      or k.removesuffix("_done") in upstream(job)}}
            for job, params in received.items()}


def _received_all(ws) -> dict[str, dict]:
    """What each Step job of the last run received; the files are removed."""
    found = {}
    for path in ws.root.glob("*.json"):
        found[path.stem] = json.loads(path.read_text())
        path.unlink()
    return found


def test_the_export_is_airflow_3_python_with_the_workflow_in_it(project):
    declare(project, "diamond", {**DIAMOND, "schedule": "15 * * * *",
                                 "jobs": {**DIAMOND["jobs"], "a": {"timeout_minutes": 30}}})
    source = airflow_dag(load_workflow(project.settings, "diamond"),
                         deltamark=["/opt/dm", "--conf-dir", "/c"], workdir="/w")
    compile(source, "dag.py", "exec")
    assert "from airflow.sdk import DAG, task" in source and "airflow.operators" not in source
    assert "schedule='15 * * * *'" in source and "max_active_runs=1" in source
    assert "[task_b, task_c] >> task_d" in source and "[task_a, task_e] >> task_g" in source
    namespace = _dag_constants(source)
    assert namespace["DELTAMARK"] == ["/opt/dm", "--conf-dir", "/c"]
    assert namespace["JOBS"]["a"]["timeout_minutes"] == 30
    fired = namespace["_fired"]
    either = namespace["JOBS"]["d"]["triggers"]
    assert fired(either, {"b": "FAILED", "c": "SUCCEEDED"})["name"] == "either"
    assert fired(either, {"b": "FAILED", "c": "SKIPPED"}) is None


def _dag_constants(source: str) -> dict:
    """The exported DAG's own code and constants, run without Airflow."""
    namespace: dict = {}
    exec(source.split("from airflow.sdk import")[0], namespace)
    return namespace


def test_the_example_pipeline_is_valid_and_exports():
    """conf/workflows/orders_pipeline.yaml: ingest -> silver -> gold, hourly, gold given
    silver's version; its export chains the same tasks with the same triggers."""
    from framework import load_settings

    workflow = load_workflow(load_settings(conf_dir="conf"), "orders_pipeline")
    assert list(workflow.jobs) == ["orders_ingest", "orders_silver", "orders_gold"]
    source = airflow_dag(workflow)
    ast.parse(source)
    assert "schedule='15 * * * *'" in source and "max_active_runs=1" in source
    assert "[task_orders_ingest] >> task_orders_silver" in source
    assert "[task_orders_silver] >> task_orders_gold" in source
    jobs = _dag_constants(source)["JOBS"]
    assert [(job, [t["conditions"] for t in jobs[job]["triggers"]]) for job in jobs] == [
        ("orders_ingest", [[]]), ("orders_silver", [[["orders_ingest", "SUCCEEDED"]]]),
        ("orders_gold", [[["orders_silver", "SUCCEEDED"]]])]
    assert jobs["orders_gold"]["triggers"][0]["args_from_properties"] == {
        "silver_version": "silver_version"}


GLUE_SCRIPT = """
import sys
from framework.glue.context import GlueContext
from framework.glue.job import Job
from framework.glue.utils import getResolvedOptions

from framework.glue.workflow import get_workflow_run_properties, put_workflow_run_properties

args = getResolvedOptions(sys.argv, ["JOB_NAME", "landing", "target", "WORKFLOW_NAME",
                                     "WORKFLOW_RUN_ID"])
workflow = {"Name": args["WORKFLOW_NAME"], "RunId": args["WORKFLOW_RUN_ID"]}
region = get_workflow_run_properties(**workflow)["RunProperties"]["region"]
glueContext = GlueContext(None)
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
frame = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args["landing"]]}, format="json",
    transformation_ctx="landing_source")
glueContext.write_dynamic_frame.from_options(
    frame=frame, connection_type="s3", connection_options={"path": args["target"]},
    format="parquet")
put_workflow_run_properties(**workflow, RunProperties={"copied": frame.count(),
                                                       "region_seen": region})
job.commit()
"""


def test_a_glue_script_is_a_workflow_job_with_its_bookmarks(project):
    ws = project
    script = ws.root / "glue_copy.py"
    script.write_text(GLUE_SCRIPT)
    target = ws.root / "lake" / "copied"
    declare(ws, "glue_flow", {
        "run_properties": {"region": "eu"},
        "jobs": {"copy_glue": {"script": str(script), "args": {
            "job-bookmark-option": "job-bookmark-enable", "landing": str(ws.landing),
            "target": str(target)}}, "a": {}},
        "triggers": [{"start": ["copy_glue"]},
                     {"when": {"all": [{"copy_glue": "SUCCEEDED"}]}, "start": ["a"]}]})
    for rows in (3, 2):
        ws.land(rows=rows)
        report = run_workflow(ws.settings, "glue_flow")
        assert report.succeeded
        # the script read the run properties and published its own, as in Glue
        assert {k: received(ws, "a")["_run_properties"][k] for k in ("copied", "region_seen")
                } == {"copied": str(rows), "region_seen": "eu"}
    runs = ws.store.runs("copy_glue")
    assert [(r.status, r.inputs["landing_source"]["files"]) for r in runs] == [
        ("succeeded", 1), ("succeeded", 1)]
    ids = sorted(r.id for r in ws.spark.read.parquet(str(target)).collect())
    assert ids == [100, 101, 102, 200, 201]
    dag = airflow_dag(load_workflow(ws.settings, "glue_flow"), deltamark=["dm"])
    assert _dag_constants(dag)["JOBS"]["copy_glue"]["run"] == ["copy_glue", "--script",
                                                              str(script)]

    # outside a workflow, or for another workflow run: one line naming the call
    ws.land(rows=1)
    with pytest.raises(JobFailedError, match="get/put_workflow_run_properties outside a "
                                             "workflow: not supported"):
        args = {"landing": str(ws.landing), "target": str(target),
                "WORKFLOW_NAME": "glue_flow", "WORKFLOW_RUN_ID": report.workflow_run_id}
        run_job(ws.settings, "copy_glue", args=args,
                spec=script_job(script, "copy_glue", args, catalog=ws.settings.catalog))
