"""Tables by their catalog name: Delta sources and targets, Glue's from_catalog and the
state tables, through the Spark session's own catalog.

The first tests use the tests' session (Spark's in-memory catalog). The last one runs a
job pair and a Glue script as separate `deltamark` processes sharing one Hive metastore
whose database is on the tests' PostgreSQL server, as a platform's jobs share theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake

from framework.errors import CatalogError, JobFailedError
from framework.spark import catalog
from framework.state.table_io import open_store

SUPPORT = Path(__file__).with_name("support_jobs.py")

#: the JVMs of the short processes the Hive test starts: C1 only, as conftest's ``spark``
C1_ONLY = {"SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1"}


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


@pytest.fixture
def database(spark, tmp_path) -> str:
    name = f"cat_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / 'warehouse'}'")
    yield name
    spark.sql(f"DROP DATABASE {name} CASCADE")


def test_a_delta_table_is_found_by_its_name_and_what_is_not_one_is_refused_in_one_line(
        spark, tmp_path, database):
    orders = str(tmp_path / "orders")
    write_deltalake(orders, pa.table({"id": [1, 2]}))
    catalog.register_delta(spark, f"{database}.orders", orders)
    catalog.register_delta(spark, f"{database}.orders", orders)  # again: nothing changes
    found = catalog.require(spark, f"{database}.orders")
    assert (found.location, found.format, found.kind) == (orders, "delta", "EXTERNAL")
    assert catalog.require(spark, f"spark_catalog.{database}.ORDERS").location == orders
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "a.json").write_text('{"a": 1}\n')
    spark.sql(f"CREATE TABLE {database}.events (a BIGINT) USING json "
              f"OPTIONS (multiLine 'false') LOCATION '{tmp_path / 'events'}'")
    assert catalog.require(spark, f"{database}.events", format=None).options == {
        "multiLine": "false"}
    spark.sql(f"CREATE VIEW {database}.recent AS SELECT * FROM {database}.orders")
    for name, said in [
            (f"{database}.events", f"table {database}.events: it is a json table at "),
            (f"{database}.recent", f"table {database}.recent: it is a view"),
            ("nowhere_db.orders", "table nowhere_db.orders: no database nowhere_db in the "
                                  "session's catalog (spark_catalog, in-memory)"),
            (f"{database}.nope", f"table {database}.nope: no such table in the session's"),
            ("data/lake/orders", "table data/lake/orders: not a table name")]:
        with pytest.raises(CatalogError) as error:
            catalog.require(spark, name)
        assert one_line(error).startswith(said), (name, str(error.value))
    with pytest.raises(CatalogError, match="forgets a table when the run ends"):
        catalog.require_lasting(spark, f"{database}.new")
    assert catalog.new_location(spark, f"{database}.New") == str(tmp_path / "warehouse" / "new")


def test_a_job_reads_and_writes_delta_tables_by_name(spark, ws, tmp_path, database):
    """read_delta(table=) and write_delta(table=) on the catalog's tables, bookmarked by
    the table's location; a path given as 0.1's table= still works; a new table the
    in-memory catalog would forget is refused before anything is written."""
    orders, copy = str(tmp_path / "orders"), str(tmp_path / "copy")
    for path in (orders, copy):
        write_deltalake(path, pa.table({"id": pa.array([], pa.int64()),
                                        "_rescued_data": pa.array([], pa.string())}))
    catalog.register_delta(spark, f"{database}.orders", orders)
    catalog.register_delta(spark, f"{database}.orders_copy", copy)
    ws.declare("up", cls="NamedCopy", target_table=f"{database}.orders")
    ws.declare("down", cls="NamedCopy", source_table=f"{database}.orders",
               target_table=f"{database}.orders_copy")
    for _ in range(2):
        ws.land(rows=2)
        ws.run("up")
        ws.run("down")
    ids = sorted(DeltaTable(orders).to_pyarrow_table()["id"].to_pylist())
    assert ids == [100, 101, 200, 201]
    assert sorted(DeltaTable(copy).to_pyarrow_table()["id"].to_pylist()) == ids
    assert ws.store.bookmarks("down")[-1].state["table"] == orders

    ws.declare("new", cls="NamedCopy", target_table=f"{database}.fresh")
    ws.land(rows=1)
    with pytest.raises(JobFailedError, match="forgets a table when the run ends"):
        ws.run("new")
    assert not (tmp_path / "warehouse" / "fresh").exists()
    ws.declare("bad", cls="NamedCopy", target_table="orders; DROP TABLE orders")
    with pytest.raises(JobFailedError, match=r"table orders; DROP TABLE orders: not a table "
                                             r"name: give table, db\.table or catalog"):
        ws.run("bad")


GLUE_SCRIPT = """\
import sys
from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["JOB_NAME", "out"])
glueContext = GlueContext(SparkContext.getOrCreate())
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
persons = glueContext.create_dynamic_frame.from_catalog(
    database="legislators", table_name="persons_json", transformation_ctx="persons")
sink = glueContext.getSink(path=args["out"], connection_type="s3",
                           updateBehavior="UPDATE_IN_DATABASE", partitionKeys=["house"],
                           enableUpdateCatalog=True, transformation_ctx="out")
sink.setCatalogInfo(catalogDatabase="legislators", catalogTableName="persons_out")
sink.setFormat("glueparquet", compression="snappy")
sink.writeFrame(persons)
job.commit()
"""


class HiveProject:
    """A project whose Spark conf shares one Hive metastore (its database on the tests'
    PostgreSQL server): each `deltamark` command is a process of its own."""

    def __init__(self, root: Path, metastore, *, delta: str = "native"):
        from databases import JARS

        self.root, self.conf = root, root / "conf"
        (self.conf / "jobs").mkdir(parents=True)
        self.spark_conf = {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(root / "warehouse"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": metastore.url,
            "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "spark.hadoop.javax.jdo.option.ConnectionUserName": metastore.user,
            "spark.hadoop.javax.jdo.option.ConnectionPassword": metastore.password,
            # the metastore's tables are made as they are first needed; their foreign keys
            # would be added while another transaction holds their rows: a deadlock
            "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
            "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
            "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
            "spark.hadoop.hive.metastore.schema.verification": "false",
            "spark.driver.extraClassPath": JARS["postgresql"]}
        self.use(delta)

    def use(self, delta: str) -> None:
        (self.conf / "deltamark.yaml").write_text(yaml.safe_dump(
            {"state_root": str(self.root / "state"), "delta": delta,
             "spark": {"master": "local[1]", "conf": self.spark_conf}}))

    def declare(self, name: str, **params: str) -> None:
        (self.conf / "jobs" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"class": f"{SUPPORT}:NamedCopy", "params": params}))

    def deltamark(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "framework", "--conf-dir", str(self.conf), *args],
            cwd=self.root, env={**os.environ, **C1_ONLY, **env}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)

    def sql(self, *statements: str, before: tuple[str, ...] = ()) -> list[list[list]]:
        """Each statement's rows, from a Spark session of the project's conf (after the
        `deltamark` command ``before``, run in the same process)."""
        code = ("import json, sys\n"
                "from typer.testing import CliRunner\n"
                "from framework import load_settings\n"
                "from framework.cli import app\n"
                "from framework.spark.session import spark_session\n"
                f"conf = {str(self.conf)!r}\n"
                "before = json.loads(sys.argv[2])\n"
                "if before:\n"
                "    done = CliRunner().invoke(app, ['--conf-dir', conf, *before])\n"
                "    assert done.exit_code == 0, done.output\n"
                "spark = spark_session(load_settings(conf_dir=conf))\n"
                "print(json.dumps([[list(r) for r in spark.sql(s).collect()]\n"
                "                  for s in json.loads(sys.argv[1])], default=str))\n")
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(statements), json.dumps(before)],
            cwd=self.root, env={**os.environ, **C1_ONLY}, capture_output=True, text=True,
            timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])


def finished(*processes: subprocess.Popen, expect: int = 0) -> list[tuple[str, str]]:
    """Wait for each process; its stdout and stderr (it must exit ``expect``)."""
    said = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == expect, (process.args, out[-2000:], err[-3000:])
        said.append((out, err))
    return said


def last_json(process: subprocess.Popen):
    """The JSON a process printed last."""
    (out, _), = finished(process)
    return json.loads(out.strip().splitlines()[-1])


def land(landing: Path, batch: int, rows: int = 2, **fields: str) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / f"batch-{batch:03}.json").write_text(
        "".join(json.dumps({"id": batch * 100 + i, **fields}) + "\n" for i in range(rows)))


def test_a_job_pair_shares_a_hive_metastore_by_name_exactly_once(pg_server, tmp_path):
    """Separate processes, one Hive metastore (on PostgreSQL): a job makes the catalog's
    sales.orders and appends to it, a downstream job reads it by name into
    sales.orders_copy, both at once; a kill at the target commit is recovered; both run
    on the embedded path too; a rewind restores the table; a Glue script's from_catalog
    reads only a catalog JSON table's new files, and its getSink enters its output table
    and partitions in the catalog; the state tables registered in the catalog count as
    deltamark counts."""
    project = HiveProject(tmp_path, pg_server.database())
    landing, persons = tmp_path / "landing", tmp_path / "persons"
    land(persons, 1, house="rep")
    project.sql("CREATE DATABASE sales", "CREATE DATABASE legislators",
                "CREATE TABLE legislators.persons_json (id BIGINT) USING json "
                f"LOCATION '{persons}'")
    project.declare("up", landing=str(landing), target_table="sales.orders")
    project.declare("down", source_table="sales.orders", target_table="sales.orders_copy")
    land(landing, 1)
    finished(project.deltamark("run", "up"))
    land(landing, 2)
    finished(project.deltamark("run", "up"), project.deltamark("run", "down"))  # at once
    land(landing, 3)
    killed = project.deltamark("run", "up", DELTAMARK_CRASH_AT="target_committed")
    assert killed.wait(timeout=300) != 0
    finished(project.deltamark("run", "up"))  # recovers the killed run

    project.use("embedded")
    land(landing, 4)
    finished(project.deltamark("run", "up"))
    finished(project.deltamark("run", "down"))
    project.declare("fresh", landing=str(landing), target_table="sales.fresh")
    (_, refused), = finished(project.deltamark("run", "fresh"), expect=1)
    assert ("table sales.fresh: not in the catalog, and a Spark session without Delta's jars "
            "(the embedded path) cannot enter a Delta table there.") in refused

    project.use("native")
    expected = sorted(batch * 100 + i for batch in (1, 2, 3, 4) for i in range(2))
    first = open_store(tmp_path / "state").runs("up")[0]
    finished(project.deltamark("bookmarks", "rewind", "up", "--to-run", first.run_id,
                               "--restore-targets"))
    finished(project.deltamark("run", "up"))  # batches 2 to 4 again, into the restored table

    script = tmp_path / "persons.py"
    script.write_text(GLUE_SCRIPT)
    glue = ("run", "--script", str(script), "--arg", "JOB_NAME=persons", "--arg",
            f"out={tmp_path / 'persons_out'}", "--arg", "job-bookmark-option=job-bookmark-enable",
            "--json")
    read_first = last_json(project.deltamark(*glue))
    land(persons, 2, house="sen")
    read_then = last_json(project.deltamark(*glue))
    orders, copied, runs, current, houses = project.sql(
        "SELECT id FROM sales.orders", "SELECT id FROM sales.orders_copy",
        "SELECT count(*) FROM ops.runs", "SELECT count(*) FROM ops.current_runs",
        "SELECT house, count(*) FROM legislators.persons_out GROUP BY house ORDER BY house",
        before=("state", "register", "--database", "ops"))
    counted = last_json(project.deltamark("sql", "--json", "SELECT count(*) AS n FROM runs"))
    assert sorted(r[0] for r in orders) == expected
    assert sorted(r[0] for r in copied) == expected
    assert runs == [[counted[0]["n"]]] and current[0][0] >= 6
    assert (read_first["inputs"]["persons"]["files"], read_then["inputs"]["persons"]["files"]) \
        == (1, 1)
    assert houses == [["rep", 2], ["sen", 2]]  # the sink's table, both runs' partitions
