"""Jobs on a remote Spark through Spark Connect: a Connect server the tests start (its own
JVM, in a working directory of its own) and ``deltamark`` processes whose ``java`` fails
if run, so that a client that started a JVM fails the test. Landing files, targets and
state are on the test S3 server, which both sides reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from deltalake import DeltaTable

from framework import storage
from framework.sinks.delta import FENCE
from framework.state.table_io import open_store
from tests.databases import unavailable
from tests.test_s3 import land
from tests.workspace import SUPPORT

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def connect_server(s3_server):
    from tests.connect import ConnectServer

    if isinstance(s3_server, str):
        unavailable(s3_server)
    try:
        started = ConnectServer(s3_server.environment)
    except OSError as exc:
        unavailable(str(exc))
    yield started
    started.stop()


class Client:
    """A project in ``directory`` whose jobs run on ``server`` (``spark.remote``), its
    state, landing files and targets in ``bucket``."""

    def __init__(self, directory: Path, server, bucket: str, *, delta: str):
        from tests.connect import without_java

        self.directory, self.bucket = directory, bucket
        self.state, self.landing = f"{bucket}/state", f"{bucket}/landing"
        self.target = f"{bucket}/lake/t"
        self.conf = directory / "conf"
        (self.conf / "jobs").mkdir(parents=True)
        self.settings = {"state_root": self.state, "delta": delta,
                         "spark": {"remote": server.url}}
        (self.conf / "deltamark.yaml").write_text(yaml.safe_dump(self.settings))
        self.env = without_java(dict(os.environ), directory)

    def job(self, name: str, job_class: str, **params: str) -> None:
        (self.conf / "jobs" / f"{name}.yaml").write_text(yaml.safe_dump({
            "class": f"{SUPPORT}:{job_class}",
            "params": {"landing": self.landing, "target": self.target, **params}}))

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "framework", "--conf-dir",
                                 str(self.conf), *args], cwd=self.directory, text=True,
                                env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def run(self, *args: str, env: dict[str, str] | None = None) -> dict:
        process = self.start("run", *args, "--json", env=env)
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        self.assert_no_jvm()
        return json.loads(out)

    def assert_no_jvm(self) -> None:
        assert not (self.directory / "java-started").exists(), "the client started a JVM"

    def ids(self) -> list[int]:
        table = DeltaTable(self.target, storage_options=storage.delta_options(self.target))
        return sorted(table.to_pyarrow_dataset().to_table(columns=["id"])["id"].to_pylist())


@pytest.mark.parametrize("delta", ["native", "embedded"])
def test_the_readme_job_runs_three_times_on_spark_connect_with_no_jvm_here(
        connect_server, bucket, tmp_path, delta):
    client = Client(tmp_path, connect_server, bucket, delta=delta)
    client.job("copy", "CopyFiles")
    land(client.landing, 1)
    assert client.run("copy")["status"] == "succeeded"
    skipped = client.run("copy")
    assert skipped["status"] == "skipped"
    land(client.landing, 2)
    third = client.run("copy")
    assert third["status"] == "succeeded" and third["inputs"]["src"]["files"] == 1
    assert client.ids() == [100, 101, 102, 200, 201, 202]
    assert [r.status for r in open_store(client.state).runs("copy")] == [
        "succeeded", "skipped", "succeeded"]


def test_a_run_with_nothing_new_sends_the_server_no_request(connect_server, bucket, tmp_path):
    """The pre-run check settles it without Spark: pointed at a port where no server
    listens, the run is skipped all the same."""
    client = Client(tmp_path, connect_server, bucket, delta="embedded")
    client.job("copy", "CopyFiles")
    land(client.landing, 1)
    client.run("copy")
    (client.conf / "deltamark.yaml").write_text(yaml.safe_dump(
        client.settings | {"spark": {"remote": "sc://127.0.0.1:9"}}))
    assert client.run("copy")["status"] == "skipped"


@pytest.mark.parametrize("delta", ["native", "embedded"])
def test_a_write_the_server_finishes_after_its_client_died_lands_nothing_twice(
        connect_server, bucket, tmp_path, delta):
    """The client is killed while the server writes; the next run starts at once (it
    recovers the killed run, then reads its input again) while that write goes on; the
    write ends after the recovery: every row is in the target once."""
    client = Client(tmp_path, connect_server, bucket, delta=delta)
    client.job("copy", "SlowCopy", slow_ms="1500")
    land(client.landing, 1, rows=1)
    client.run("copy")
    land(client.landing, 2)  # 3 rows: 4.5 s of writing
    killed = client.start("run", "copy", env={"DELTAMARK_TEST_KILL_AFTER": "1.5"})
    killed.communicate(timeout=300)
    assert killed.returncode == -9
    started = time.monotonic()
    recovered = client.run("copy")
    assert recovered["status"] == "succeeded"
    assert recovered["recovered"]["action"] == "aborted"
    time.sleep(max(0.0, 6 - (time.monotonic() - started)))  # the dead client's write ended
    assert client.ids() == [100, 200, 201, 202]
    if delta == "native":  # the server's write of the killed run met the fence
        history = DeltaTable(client.target, storage_options=storage.delta_options(
            client.target)).history()
        assert sum(FENCE in json.loads(c.get("userMetadata", "{}")) for c in history) == 1


def test_the_demo_workflow_runs_on_spark_connect(connect_server, tmp_path):
    """conf/workflows/orders_pipeline.yaml, with its data-quality gates, each job in a
    process of its own (no deltamark server: no JVM to keep); paths relative to the
    client's directory, which the server (elsewhere) is given made absolute."""
    from tests.connect import without_java

    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    settings = yaml.safe_load((tmp_path / "conf" / "deltamark.yaml").read_text())
    settings["spark"] = {"remote": connect_server.url}
    (tmp_path / "conf" / "deltamark.yaml").write_text(yaml.safe_dump(settings))
    env = without_java(dict(os.environ), tmp_path) | {"PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "jobs.orders_landing", "--landing",
                    "data/landing/orders", "--batches", "2"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "framework", "workflow", "run",
                           "orders_pipeline"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert not (tmp_path / "java-started").exists()
    gold = DeltaTable(str(tmp_path / "data/lake/gold/daily_revenue"))
    assert gold.to_pyarrow_dataset().count_rows() > 0


def test_a_database_source_and_sink_run_on_spark_connect(connect_server, bucket, tmp_path,
                                                         database):
    """The read is planned, and a PostgreSQL target's rows landed (one transaction, with
    the run's mark), through a Python driver here; the server's JDBC reader reads and its
    writer stages. (A SQLite table is read into Delta: Spark's JDBC writer cannot stage
    into SQLite, on Connect or not.)"""
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount DECIMAL(10, 2))",
                     "INSERT INTO orders VALUES (?, ?)", rows=[(1, 9.5), (2, 20)])
    client = Client(tmp_path, connect_server, bucket, delta="embedded")
    (client.conf / "deltamark.yaml").write_text(yaml.safe_dump(client.settings | {
        "connections": {"shop": {"url": database.url, "user": database.user,
                                 "password": database.password}}}))
    to_table = database.kind == "postgresql"
    (client.conf / "jobs" / "copy.yaml").write_text(yaml.safe_dump({
        "class": f"{SUPPORT}:{'TableToTable' if to_table else 'TableCopy'}",
        "params": {"connection": "shop", "table": "orders", "keys": "id", "to": "copied",
                   "target": client.target}}))
    assert client.run("copy")["status"] == "succeeded"
    database.execute("INSERT INTO orders VALUES (?, ?)", rows=[(3, 7.25)])
    assert client.run("copy")["status"] == "succeeded"
    assert client.run("copy")["status"] == "skipped"
    if not to_table:
        assert client.ids() == [1, 2, 3]
        return
    assert sorted(int(r[0]) for r in database.query("SELECT id FROM copied")) == [1, 2, 3]
    assert [int(r[0]) for r in database.query(
        "SELECT run_seq FROM deltamark_commits ORDER BY run_seq")] == [1, 2]


@pytest.mark.parametrize("delta", ["native", "embedded"])
def test_a_glue_script_runs_three_times_on_spark_connect(connect_server, bucket, tmp_path,
                                                         delta):
    """jobs/glue_orders.py, unchanged (SparkContext.getOrCreate(), two bookmarked sources,
    a Relationalize, Parquet and Delta writes, job.commit()), on S3: each file once."""
    from tests.test_glue import SCRIPT
    from tests.test_s3 import land_glue_orders

    client = Client(tmp_path, connect_server, bucket, delta=delta)

    def land(batches: int) -> None:
        land_glue_orders(f"{bucket}/landing", tmp_path / "landing", batches)

    def run() -> dict:
        return client.run("--script", str(SCRIPT), "--arg", "JOB_NAME=glue_orders",
                          "--arg", "job-bookmark-option=job-bookmark-enable",
                          "--arg", f"orders_path={bucket}/landing/orders",
                          "--arg", f"documents_path={bucket}/landing/documents",
                          "--arg", f"target={bucket}/lake")

    land(batches=2)
    assert run()["inputs"]["orders_source"]["files"] == 2
    assert run()["status"] == "skipped"
    land(batches=1)
    third = run()["inputs"]
    assert (third["orders_source"]["files"], third["documents_source"]["files"]) == (1, 1)
    lake = f"{bucket}/lake"
    orders = pq.read_table(f"{lake.removeprefix('s3://')}/orders",
                           filesystem=storage.filesystem(lake)[0]).column("order_id")
    assert len(orders) == len(set(orders.to_pylist())) == 60
    documents = DeltaTable(f"{lake}/documents", storage_options=storage.delta_options(lake))
    ids = documents.to_pyarrow_dataset().to_table(columns=["order_id"])["order_id"]
    assert len(ids) == len(set(ids.to_pylist())) == 30


GLUE_FUNCTIONS_SCRIPT = """
import json
import sys

from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.transforms import Filter, Map, Unbox
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["JOB_NAME", "landing", "target"])
sc = SparkContext()
sc.setLogLevel("WARN")
glueContext = GlueContext(sc)
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
orders = glueContext.create_dynamic_frame.from_options(
    "s3", {"paths": [args["landing"]]}, format="json", transformation_ctx="orders")


def describe(record):
    record["doc"] = json.dumps({"even": record["id"] % 2 == 0, "tags": ["a", "b"]})
    record["inverse"] = 1 / (record["id"] % 100)
    return record


described = Map.apply(frame=Filter.apply(frame=orders, f=lambda r: r["id"] < 202), f=describe)
assert described.errorsCount() == 2, described.errorsAsDynamicFrame().toDF().collect()
unboxed = Unbox.apply(frame=described, path="doc", format="json")
assert unboxed.toDF().schema["doc"].dataType.simpleString() == \
    "struct<even:boolean,tags:array<string>>"
glueContext.write_dynamic_frame.from_options(
    frame=unboxed, connection_type="s3", connection_options={"path": args["target"]},
    format="delta")
job.commit()
"""


def test_a_glue_script_s_python_functions_run_on_the_server_s_workers(
        connect_server, bucket, tmp_path):
    """Filter and Map with the script's functions, and Unbox, whose JSON schema is read by
    the server, where deltamark is not installed; what needs a SparkContext here refuses
    in one line."""
    client = Client(tmp_path, connect_server, bucket, delta="embedded")
    script = tmp_path / "functions.py"
    script.write_text(GLUE_FUNCTIONS_SCRIPT)
    for batch in (1, 2):
        land(client.landing, batch)  # ids 100-102, 200-202
    done = client.run("--script", str(script), "--arg", "JOB_NAME=functions",
                      "--arg", f"landing={client.landing}", "--arg", f"target={client.target}")
    assert done["status"] == "succeeded"
    assert client.ids() == [101, 102, 201]  # 100 and 200 raised; 202 filtered out

    script.write_text("from pyspark.context import SparkContext\n"
                      "SparkContext()._jsc.hadoopConfiguration()\n")
    process = client.start("run", "--script", str(script), "--arg", "JOB_NAME=refused")
    _, err = process.communicate(timeout=300)
    assert process.returncode == 1
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "SparkContext._jsc needs a Spark JVM in this process" in error[0]
    client.assert_no_jvm()


def test_an_unreachable_server_is_said_at_once_in_one_line():
    """(Connect's client itself retries for minutes before it gives up.)"""
    from framework.config import Settings, SparkSettings
    from framework.errors import SparkStartError
    from framework.spark.session import spark_session
    from tests.connect import free_port

    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(SparkStartError, match=f"Spark Connect server {url}: nothing answers "
                       f"at 127.0.0.1:{url.rsplit(':', 1)[1]}") as error:
        spark_session(Settings(spark=SparkSettings(remote=url)))
    assert "\n" not in str(error.value)
