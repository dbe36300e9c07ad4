"""OpenLineage events, received by a real HTTP endpoint and validated against the
OpenLineage JSON schemas (tests/openlineage_spec), and the Prometheus metrics, parsed by
prometheus_client's parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from databases import unavailable
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families
from referencing import Registry, Resource
from typer.testing import CliRunner

from framework.cli import app
from framework.errors import JobFailedError
from framework.run import lineage
from framework.workflows import run_workflow
from state_tables.model import Run

SPEC = Path(__file__).with_name("openlineage_spec")
OPENLINEAGE_SPARK_VERSION = "1.53.0"  # .ci/test_tools.sh resolves it
OPENLINEAGE_SPARK_JAR = (Path(__file__).resolve().parents[1] / ".venv" / "share" / "deltamark"
                         / "test-tools" / f"openlineage-spark_2.13-{OPENLINEAGE_SPARK_VERSION}.jar")
ORDERS_RULES = [{"IsComplete": "order_id"},
                {"ColumnValues": {"column": "amount", "between": [0, 10000]}}]


def _schemas() -> dict[str, dict]:
    """Each schema by its file name (a facet's ``_schemaURL`` names its version: any)."""
    found = {p.name: json.loads(p.read_text()) for p in SPEC.glob("*.json")}
    found["lineage_facets.json"] = json.loads(lineage.FACETS_SCHEMA.read_text())
    return found


SCHEMAS = _schemas()
REGISTRY = Registry(retrieve=lambda uri: Resource.from_contents(
    SCHEMAS[uri.rsplit("/", 1)[-1]]))


def validate(event: dict) -> None:
    """``event`` is a RunEvent of the spec, and each facet is what its schema says."""
    def check(instance: dict, url: str) -> None:
        document, _, pointer = url.partition("#")
        schema = {"$ref": f"{document}#{pointer}"}
        Draft202012Validator(schema, registry=REGISTRY).validate(instance)

    check(event, "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent")
    facets = [*event["run"]["facets"].values(), *event["job"]["facets"].values()]
    for dataset in [*event["inputs"], *event["outputs"]]:
        for key in ("facets", "inputFacets", "outputFacets"):
            facets += dataset.get(key, {}).values()
    for facet in facets:
        check(facet, facet["_schemaURL"])


class Endpoint:
    """An HTTP server taking OpenLineage events as Marquez does (POST /api/v1/lineage)."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        received = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/api/v1/lineage":
                    received.append(json.loads(body))
                self.send_response(201 if self.path == "/api/v1/lineage" else 404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def take(self) -> list[dict]:
        """The events received since the last take; deltamark's are validated."""
        found = list(self.events)
        self.events.clear()
        for event in found:
            if event["producer"] == lineage.PRODUCER:
                validate(event)
        return found


@pytest.fixture(autouse=True)
def own_environment():
    """No OPENLINEAGE variable before a test, and none left after it: the client writes its
    configuration into the environment (OPENLINEAGE__TRANSPORT__...), which would send
    every later test's runs to an endpoint that is gone."""
    before = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("OPENLINEAGE")}
    yield
    for name in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        del os.environ[name]
    os.environ.update(before)


@pytest.fixture
def endpoint(monkeypatch):
    found = Endpoint()
    monkeypatch.setenv("OPENLINEAGE_URL", found.url)
    monkeypatch.setenv("OPENLINEAGE_NAMESPACE", "shop")
    yield found
    found.server.shutdown()


def _named(found: dict) -> tuple[str, str]:
    return found["namespace"], found["name"]


def _land(ws, name: str, rows: list[tuple[int, str, float, str]]) -> None:
    ws.landing.joinpath(name).write_text("".join(
        json.dumps({"order_id": o, "email": e, "amount": a, "status": s}) + "\n"
        for o, e, a, s in rows))


def test_a_run_tells_its_datasets_bookmark_quality_and_parent(ws, endpoint, monkeypatch):
    parent = f"airflow/orders_dag.ingest/{uuid.uuid4()}"
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", parent)
    ws.declare(cls="CheckedCopy", ruleset="orders",
               checks={"orders": {"policy": "fail", "rules": ORDERS_RULES}})
    _land(ws, "a.json", [(1, "a@x", 10.0, "new"), (2, "b@x", 20.0, "new")])
    first = ws.run("copy")
    start, complete = endpoint.take()
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"] == str(uuid.UUID(first.run_id))
    assert _named(complete["job"]) == ("shop", "copy")
    assert complete["job"]["facets"]["jobType"]["jobType"] == "JOB"
    facets = complete["run"]["facets"]
    assert _named(facets["parent"]["job"]) == ("airflow", "orders_dag.ingest")
    assert facets["parent"]["run"]["runId"] == parent.rsplit("/", 1)[1]
    assert facets["deltamark_run"]["deltamark_run_id"] == first.run_id
    assert facets["deltamark_run"]["run_seq"] == 1

    (read,) = complete["inputs"]
    assert _named(read) == ("file", str(ws.landing))
    assert [f["name"] for f in read["facets"]["schema"]["fields"]] == [
        "order_id", "email", "amount", "status"]
    assert read["inputFacets"]["inputStatistics"]["fileCount"] == 1
    bookmark = read["inputFacets"]["deltamark_bookmark"]
    assert bookmark["context"] == "src" and "started_from" not in bookmark  # read all
    assert bookmark["read"].startswith("1 of 1 file")
    assert bookmark["committed"] is not None

    (wrote,) = complete["outputs"]
    assert _named(wrote) == ("file", ws.target)
    assert wrote["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assertions = wrote["facets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a["success"]) for a in assertions] == [
        ("IsComplete", True), ("ColumnValues", True)]

    # nothing new: the run is skipped before Spark starts, and says nothing
    assert ws.run("copy").status == "skipped"
    assert endpoint.take() == []

    # a failing run: FAIL, with its error and the rules that rejected it
    _land(ws, "b.json", [(3, "c@x", -5.0, "new")])
    with pytest.raises(JobFailedError):
        ws.run("copy")
    start, fail = endpoint.take()
    assert fail["eventType"] == "FAIL"
    assert "ColumnValues" in fail["run"]["facets"]["errorMessage"]["message"]
    (checked,) = fail["outputs"]
    assert not checked["facets"]["dataQualityAssertions"]["assertions"][1]["success"]
    assert "outputStatistics" not in checked["outputFacets"]  # nothing was written
    bookmark = fail["inputs"][0]["inputFacets"]["deltamark_bookmark"]
    assert bookmark["started_from"] is not None  # it started where run 1 ended


def test_recovery_aborts_an_interrupted_run_with_an_abort_event(ws, endpoint):
    ws.declare()
    ws.land()
    ws.run("copy")
    endpoint.take()
    # a run that died before any target had it (as after a SIGKILL mid-read)
    dead = uuid.uuid4().hex
    ws.store.record_run(Run(job="copy", run_id=dead, run_seq=2, status="running",
                            mode="enable", started_at=datetime.now(UTC)))
    ws.land()
    ws.run("copy")
    events = endpoint.take()
    assert [e["eventType"] for e in events] == ["ABORT", "START", "COMPLETE"]
    assert events[0]["run"]["runId"] == str(uuid.UUID(dead))


def test_a_workflow_run_is_the_parent_of_its_jobs_runs(ws, endpoint):
    for job in "ab":
        ws.declare(name=job, cls="Step", out=str(ws.root))
    (ws.conf / "workflows").mkdir()
    (ws.conf / "workflows" / "pair.yaml").write_text(yaml.safe_dump({
        "jobs": {"a": {}, "b": {}},
        "triggers": [{"name": "start", "start": ["a"]},
                     {"name": "then", "when": {"all": [{"a": "SUCCEEDED"}]}, "start": ["b"]}]}))
    report = run_workflow(ws.settings, "pair")
    assert report.succeeded
    events = endpoint.take()
    flow = [e for e in events if e["job"]["name"] == "pair"]
    assert [e["eventType"] for e in flow] == ["START", "COMPLETE"]
    assert flow[0]["job"]["facets"]["jobType"]["jobType"] == "WORKFLOW"
    flow_run = str(uuid.UUID(report.workflow_run_id))
    jobs = [e for e in events if e["job"]["name"] in "ab"]
    assert sorted((e["job"]["name"], e["eventType"]) for e in jobs) == [
        ("a", "COMPLETE"), ("a", "START"), ("b", "COMPLETE"), ("b", "START")]
    for event in jobs:
        parent = event["run"]["facets"]["parent"]
        assert _named(parent["job"]) == ("shop", "pair")
        assert parent["run"]["runId"] == flow_run
        assert parent["root"]["run"]["runId"] == flow_run


def test_a_task_of_an_exported_dag_is_the_parent_of_its_jobs_run_in_airflow(
        ws, endpoint, airflow, airflow_home):
    """The exported DAG in Airflow 3 (airflow dags test) with its OpenLineage provider
    sending to the same endpoint: the task's run is the parent of the deltamark run."""
    ws.declare(name="a", cls="Step", out=str(ws.root))
    (ws.conf / "workflows").mkdir()
    (ws.conf / "workflows" / "solo.yaml").write_text(yaml.safe_dump({
        "jobs": {"a": {}}, "triggers": [{"name": "start", "start": ["a"]}]}))
    home = airflow_home
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "scheduler",
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "http",
                                                         "url": endpoint.url})}
    exported = CliRunner().invoke(app, [
        "--conf-dir", str(ws.conf), "workflow", "export", "solo", "--deltamark",
        f"{sys.executable} -m framework", "--workdir", str(ws.root),
        "-o", str(home / "dags" / "solo.py")])
    assert exported.exit_code == 0, exported.output
    tested = subprocess.run([airflow, "dags", "test", "solo"], env=env, capture_output=True,
                            text=True, timeout=600)
    events = endpoint.take()
    ours = [e for e in events if e["producer"] == lineage.PRODUCER]
    assert [e["eventType"] for e in ours] == ["START", "COMPLETE"], tested.stdout[-3000:]
    parent = ours[0]["run"]["facets"]["parent"]
    assert _named(parent["job"]) == ("scheduler", "solo.a")
    task = [e for e in events if e["job"]["name"] == "solo.a"]  # the provider's own
    assert task and {e["run"]["runId"] for e in task} == {parent["run"]["runId"]}


def test_sparks_own_listener_gets_the_deltamark_run_as_its_parent(ws, tmp_path):
    """``deltamark run`` in its own process, as a scheduler starts it, on a session with
    OpenLineage's Spark listener (a file transport); deltamark's events in a file too."""
    if not OPENLINEAGE_SPARK_JAR.is_file():
        unavailable(f"{OPENLINEAGE_SPARK_JAR.name} is missing: bash .ci/test_tools.sh")
    spark_events, own_events = tmp_path / "spark-events.json", tmp_path / "events.json"
    (ws.conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(ws.root / "state"), "spark": {"conf": {
            "spark.jars": str(OPENLINEAGE_SPARK_JAR),
            "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(spark_events),
            "spark.openlineage.namespace": "spark"}}}))
    config = tmp_path / "openlineage.yml"
    config.write_text(yaml.safe_dump({"transport": {
        "type": "file", "log_file_path": str(own_events), "append": True}}))
    ws.declare()
    ws.land()
    run = ws.start_run(OPENLINEAGE_CONFIG=str(config))
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-2000:]
    own = [json.loads(line) for line in own_events.read_text().splitlines()]
    assert [e["eventType"] for e in own] == ["START", "COMPLETE"]
    run_id = own[0]["run"]["runId"]
    spark = [json.loads(line) for line in spark_events.read_text().splitlines()]
    parents = {(p["job"]["namespace"], p["job"]["name"], p["run"]["runId"])
               for e in spark if (p := e["run"]["facets"].get("parent"))
               and p["job"]["namespace"] == "deltamark"}
    assert parents == {("deltamark", "copy", run_id)}  # the Spark application's run
    assert any(e["eventType"] == "COMPLETE" and e["outputs"] for e in spark)


def test_lineage_is_off_unless_configured_and_a_dead_endpoint_fails_no_run(
        ws, monkeypatch, tmp_path, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert lineage.Lineage.configured(ws.settings) is None  # nothing configured here
    # an openlineage.yml in the working directory, naming an endpoint nothing listens on
    Path("openlineage.yml").write_text(yaml.safe_dump({"transport": {
        "type": "http", "url": "http://127.0.0.1:9", "timeout": 1,
        "retry": {"total": 0, "connect": 0, "read": 0}}}))
    assert lineage.Lineage.configured(ws.settings) is not None
    ws.declare()
    ws.land()
    assert ws.run("copy").status == "succeeded"
    assert "the OpenLineage START event of copy was not sent" in caplog.text
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert lineage.Lineage.configured(ws.settings) is None


@pytest.mark.parametrize(("environ", "said"), [
    ({"OPENLINEAGE_PARENT_ID": "ns/dag.task/%s" % ("1" * 32)}, ("ns", "dag.task", "ns")),
    ({"OPENLINEAGE_PARENT_ID": "ns/a/b/%s" % ("1" * 32),
      "OPENLINEAGE_ROOT_PARENT_ID": "root/dag/%s" % ("2" * 32)}, ("ns", "a/b", "root")),
    ({"OPENLINEAGE_PARENT_ID": "not-a-parent"}, None),
    ({"OPENLINEAGE_CONTEXT": json.dumps({"parent": {
        "run": {"runId": str(uuid.UUID("3" * 32))}, "job": {"namespace": "x", "name": "y"}}})},
     ("x", "y", "x")),
])
def test_a_parent_is_named_as_dbt_ol_and_airflow_name_it(environ, said):
    parent = lineage.Parent.from_env(environ)
    assert (parent and (parent.run.namespace, parent.run.name, parent.root.namespace)) == said
    if parent is not None:  # what a deltamark workflow hands its jobs reads back the same
        assert lineage.Parent.from_env(lineage.parent_env(parent)) == parent


@pytest.mark.parametrize(("url", "table", "named"), [
    ("jdbc:postgresql://db.example:6543/shop", "orders", ("postgres://db.example:6543",
                                                         "shop.public.orders")),
    ("jdbc:postgresql://db.example/shop?ssl=true", "sales.orders",
     ("postgres://db.example:5432", "shop.sales.orders")),
    ("jdbc:mysql://127.0.0.1/shop", "orders", ("mysql://127.0.0.1:3306", "shop.orders")),
    ("jdbc:sqlite:/data/shop.sqlite", "customers", ("sqlite", "/data/shop.sqlite.customers")),
])
def test_database_datasets_are_named_as_openlineage_names_them(url, table, named):
    from framework.jdbc import Connection

    assert _named(lineage.Dataset.in_database(Connection(url), table).__dict__) == named


@pytest.mark.parametrize(("path", "named"), [
    ("s3://lake/bronze/orders/", ("s3://lake", "bronze/orders")),
    ("s3a://lake/bronze/orders", ("s3://lake", "bronze/orders")),
    ("file:///data/landing", ("file", "/data/landing")),
    ("/data/landing", ("file", "/data/landing")),
])
def test_paths_are_named_as_openlineage_names_them(path, named):
    assert _named(lineage.Dataset.at_path(path).__dict__) == named


def test_metrics_scrape_and_say_each_jobs_last_run_backlog_and_rules(ws):
    from framework.ui.app import create_app

    ws.declare(cls="CheckedCopy", ruleset="orders",
               checks={"orders": {"policy": "fail", "rules": ORDERS_RULES}})
    _land(ws, "a.json", [(1, "a@x", 10.0, "new"), (2, "b@x", 20.0, "new")])
    ws.run("copy")
    _land(ws, "b.json", [(3, "c@x", -5.0, "new")])
    with pytest.raises(JobFailedError):
        ws.run("copy")
    _land(ws, "c.json", [(4, "d@x", 1.0, "new")] * 3)

    client = create_app(ws.settings).test_client()
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    found = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "job"))): s.value
             for family in text_string_to_metric_families(response.get_data(as_text=True))
             for s in family.samples if s.labels.get("job") == "copy"}
    assert found[("deltamark_job_last_run_status", (("status", "failed"),))] == 1
    assert found[("deltamark_job_last_run_status", (("status", "succeeded"),))] == 0
    assert found[("deltamark_job_failures_in_a_row", ())] == 1
    assert found[("deltamark_job_seconds_since_last_success", ())] > 0
    assert found[("deltamark_job_last_run_files_read", ())] == 1
    assert ("deltamark_job_last_run_rows_written", ()) not in found  # rejected: none
    assert found[("deltamark_source_backlog_files", (("context", "src"),))] == 2
    assert found[("deltamark_source_backlog_bytes", (("context", "src"),))] == sum(
        ws.landing.joinpath(n).stat().st_size for n in ("b.json", "c.json"))
    assert found[("deltamark_dq_rules_failed", (("ruleset", "orders"),
                                                ("target", ws.target)))] == 1

    # the same text for a node exporter's text-file collector
    out = ws.root / "deltamark.prom"
    printed = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "metrics", "-o", str(out)])
    assert printed.exit_code == 0, printed.output
    assert out.stat().st_mode & 0o777 == 0o644  # a node exporter's collector reads it
    families = {f.name for f in text_string_to_metric_families(out.read_text())}
    assert {"deltamark_job_last_run_status", "deltamark_source_backlog_files",
            "deltamark_dq_rule_failed"} <= families
    nowhere = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "metrics", "-o",
                                       str(ws.root / "no" / "such.prom")])
    assert nowhere.exit_code == 1
    assert "cannot write" in nowhere.output and "such.prom" in nowhere.output
