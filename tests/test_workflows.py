"""Workflows: validation, a real run (each job its own deltamark process), timeouts,
resume, status, and the Airflow export."""

from __future__ import annotations

import ast
import json

import pytest
import yaml
from typer.testing import CliRunner

from framework.cli import app
from framework.errors import ConfigError, WorkflowError
from framework.workflows import airflow_dag, load_workflow, resume_workflow, run_workflow

DIAMOND = {
    "description": "every kind of trigger",
    "max_concurrency": 2,
    "run_properties": {"region": "eu"},
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
         "start": ["g"]},
    ],
}


@pytest.fixture
def project(ws):
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
    assert "conflicting triggers start b (again, trigger_2)" in problems
    assert "cycle b -> c -> b" in problems
    assert "jobs.h: unreachable" in problems


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
    # precedence: job conf < workflow args < trigger args < run properties
    assert received(project, "b")["x"] == "trigger"
    assert received(project, "a")["x"] == "job"
    # run properties: the workflow's, the command line's, and what earlier jobs published
    assert {k: received(project, "d")[k] for k in ("region", "batch", "a_done", "c_done")} \
        == {"region": "eu", "batch": "42", "a_done": "1", "c_done": "1"}
    assert "c_done" not in received(project, "c")
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
    assert received(project, "g")["batch"] == "42"  # the original run properties

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


def test_a_job_past_its_time_limit_times_out_and_a_killed_one_is_stopped(project):
    declare(project, "slow", {
        "jobs": {"h": {"timeout_minutes": 0.15, "args": {"sleep_s": "120"}},
                 "c": {"args": {"kill": "true"}}, "a": {}},
        "triggers": [{"start": ["h", "c"]},
                     {"when": {"all": [{"h": "TIMEOUT"}, {"c": "STOPPED"}]},
                      "start": ["a"]}]})
    runner = CliRunner()
    result = runner.invoke(app, ["--conf-dir", str(project.conf), "workflow", "run", "slow"])
    assert result.exit_code == 1
    assert "h                        TIMEOUT" in result.output
    assert "stopped after its time limit of 0.15 minutes" in result.output
    assert "c                        STOPPED in" in result.output
    assert "stopped by SIGKILL" in result.output
    assert "a                        SUCCEEDED" in result.output


def test_airflow_export_declares_the_same_tasks_and_dependencies(project):
    body = {**DIAMOND, "schedule": "15 * * * *",
            "jobs": {**DIAMOND["jobs"], "a": {"timeout_minutes": 30}}}
    declare(project, "diamond", body)
    source = airflow_dag(load_workflow(project.settings, "diamond"), deltamark="/opt/dm")
    tree = ast.parse(source)
    tasks, rules, edges = {}, {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "BashOperator":
            kwargs = {k.arg: k.value for k in node.keywords}
            task = kwargs["task_id"].value
            tasks[task] = kwargs["bash_command"].value
            if "trigger_rule" in kwargs:
                rules[task] = kwargs["trigger_rule"].value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift):
            for upstream in node.left.elts:
                edges.add((upstream.id.removeprefix("task_"), node.right.id.removeprefix("task_")))
    assert set(tasks) == set(DIAMOND["jobs"])
    assert tasks["b"] == "/opt/dm run b --arg fail=true --arg x=trigger --arg region=eu"
    assert rules == {"b": "all_success", "c": "all_success", "d": "one_success",
                     "e": "all_success", "f": "all_failed", "g": "all_success"}
    assert edges == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("b", "e"),
                     ("b", "f"), ("e", "g"), ("a", "g")}
    assert "schedule='15 * * * *'" in source and "timedelta(minutes=30)" in source
    compile(source, "dag.py", "exec")

    declare(project, "mixed", {"jobs": {"a": {}, "b": {}, "c": {}}, "triggers": [
        {"start": ["a", "b"]},
        {"name": "odd", "when": {"all": [{"a": "SUCCEEDED"}, {"b": "FAILED"}]},
         "start": ["c"]}]})
    with pytest.raises(WorkflowError, match="trigger odd: Airflow's trigger rules cannot"):
        airflow_dag(load_workflow(project.settings, "mixed"))
    exported = CliRunner().invoke(app, ["--conf-dir", str(project.conf), "workflow",
                                        "export", "diamond"])
    assert exported.exit_code == 0 and "with DAG(dag_id='diamond'" in exported.output


def test_the_example_pipeline_is_valid_and_exports():
    from framework import load_settings

    workflow = load_workflow(load_settings(conf_dir="conf"), "orders_pipeline")
    assert list(workflow.jobs) == ["orders_ingest", "orders_silver", "orders_gold"]
    ast.parse(airflow_dag(workflow))


GLUE_SCRIPT = """
import sys
from framework.glue.context import GlueContext
from framework.glue.job import Job
from framework.glue.utils import getResolvedOptions

args = getResolvedOptions(sys.argv, ["JOB_NAME", "landing", "target"])
glueContext = GlueContext(None)
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
frame = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args["landing"]]}, format="json",
    transformation_ctx="landing_source")
glueContext.write_dynamic_frame.from_options(
    frame=frame, connection_type="s3", connection_options={"path": args["target"]},
    format="parquet")
job.commit()
"""


def test_a_glue_script_is_a_workflow_job_with_its_bookmarks(project):
    ws = project
    script = ws.root / "glue_copy.py"
    script.write_text(GLUE_SCRIPT)
    target = ws.root / "lake" / "copied"
    declare(ws, "glue_flow", {
        "jobs": {"copy_glue": {"script": str(script), "args": {
            "job-bookmark-option": "job-bookmark-enable", "landing": str(ws.landing),
            "target": str(target)}}},
        "triggers": [{"start": ["copy_glue"]}]})
    for rows in (3, 2):
        ws.land(rows=rows)
        assert run_workflow(ws.settings, "glue_flow").succeeded
    runs = ws.store.runs("copy_glue")
    assert [(r.status, r.inputs["landing_source"]["files"]) for r in runs] == [
        ("succeeded", 1), ("succeeded", 1)]
    ids = sorted(r.id for r in ws.spark.read.parquet(str(target)).collect())
    assert ids == [100, 101, 102, 200, 201]
    dag = airflow_dag(load_workflow(ws.settings, "glue_flow"), deltamark="dm")
    assert f"dm run copy_glue --script {script} --arg" in dag
