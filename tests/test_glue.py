"""The Glue script layer: getResolvedOptions parses and rejects arguments as Glue does; a
Glue-style script runs through deltamark run --script with Glue's bookmark semantics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from framework.cli import app
from framework.errors import GlueArgumentError, GlueUnsupportedError
from framework.glue import getResolvedOptions


def test_resolves_the_options_asked_for_and_the_bookmark_arguments():
    argv = ["script.py", "--JOB_NAME", "orders", "--landing=s3://bucket/in", "--TempDir",
            "/tmp", "--job-bookmark-option", "job-bookmark-enable", "--extra-flag"]
    assert getResolvedOptions(argv, ["JOB_NAME", "landing"]) == {
        "JOB_NAME": "orders", "landing": "s3://bucket/in",
        "job_bookmark_option": "job-bookmark-enable", "job_bookmark_from": None,
        "job_bookmark_to": None}
    # Glue's default mode is disable; the legacy continuation option maps onto the modes
    assert getResolvedOptions(["s"], [])["job_bookmark_option"] == "job-bookmark-disable"
    legacy = getResolvedOptions(["s", "--continuation-option", "continuation-readonly",
                                 "--job-bookmark-from", "r1", "--job-bookmark-to", "r2"], [])
    assert legacy == {"job_bookmark_option": "job-bookmark-pause",
                      "job_bookmark_from": "r1", "job_bookmark_to": "r2"}


@pytest.mark.parametrize(("argv", "options", "message"), [
    (["s"], ["JOB_NAME", "landing"],
     "the following arguments are required: --JOB_NAME, --landing"),
    (["s", "--JOB_NAME"], ["JOB_NAME"], "argument --JOB_NAME: expected one argument"),
    (["s"], ["job-bookmark-option"], "Using reserved arguments --job-bookmark-option"),
    (["s", "--job-bookmark-option", "on"], [],
     "argument --job-bookmark-option: invalid choice: 'on' (choose from "
     "'job-bookmark-enable', 'job-bookmark-disable', 'job-bookmark-pause')"),
    (["s", "--continuation-option", "continuation-sometimes"], [],
     "argument --continuation-option: invalid choice: 'continuation-sometimes'"),
    (["s", "--continuation-option", "continuation-enabled", "--job-bookmark-option",
      "job-bookmark-enable"], [], "--job-bookmark-option and --continuation-option are both"),
    (["s", "--job-bookmark-option", "job-bookmark-enable", "--job-bookmark-from", "r1"], [],
     "Invalid option(s): --job-bookmark-from only apply with --job-bookmark-option "
     "job-bookmark-pause"),
    (["s", "--job-bookmark-option", "job-bookmark-pause", "--job-bookmark-from", "r1"], [],
     "Missing option or value for --job-bookmark-to"),
])
def test_bad_arguments_fail_with_glues_messages(argv, options, message):
    with pytest.raises(GlueArgumentError) as exc:
        getResolvedOptions(argv, options)
    assert str(exc.value).startswith(message)


# --- Glue scripts run by deltamark ---------------------------------------------------------

SCRIPT = Path(__file__).parents[1] / "jobs" / "glue_orders.py"


@pytest.fixture
def glue_project(tmp_path):
    from jobs import order_documents_landing, orders_landing

    paths = {name: tmp_path / name for name in ("orders", "documents", "lake", "state")}

    def land(batches=1):
        orders_landing.land(paths["orders"], batches=batches, orders=20)
        order_documents_landing.land(paths["documents"], batches=batches, orders=10)

    def run(*extra, script=SCRIPT, bookmark="job-bookmark-enable"):
        args = ["--state-root", str(paths["state"]), "run", "--script", str(script), "--json",
                "--arg", "JOB_NAME=glue_orders", "--arg", f"orders_path={paths['orders']}",
                "--arg", f"documents_path={paths['documents']}",
                "--arg", f"target={paths['lake']}", *extra]
        if bookmark:
            args += ["--arg", f"job-bookmark-option={bookmark}"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])

    return paths, land, run


def lake_rows(spark, lake, table, *columns):
    from framework.delta import delta_engine

    return [tuple(r) for r in delta_engine(spark, mode="embedded").read(str(lake / table))
            .select(*columns).collect()]


@pytest.mark.compat
def test_a_glue_script_runs_incrementally_and_exactly_once(spark, glue_project, tmp_path):
    paths, land, run = glue_project
    land(batches=2)
    first = run()
    assert first["inputs"]["orders_source"]["files"] == 2
    assert first["inputs"]["documents_source"]["files"] == 2
    land()
    second = run()
    assert second["inputs"]["orders_source"]["files"] == 1
    assert run()["status"] == "skipped"  # nothing new: Spark is not even started
    orders = [r.order_id for r in spark.read.parquet(str(paths["lake"] / "orders")).collect()]
    assert len(orders) == len(set(orders)) == 60  # plain Parquet, partitioned by country
    documents = lake_rows(spark, paths["lake"], "documents", "order_id")
    assert len(documents) == len(set(documents)) == 30
    lines = lake_rows(spark, paths["lake"], "documents_lines", "id", "index")
    assert len(lines) == len(set(lines)) > 0
    # the bookmark a native job would record for the same files
    from framework.state.table_io import open_store

    store = open_store(paths["state"])
    glue_state = {b.context: b for b in store.bookmarks("glue_orders")}
    assert set(glue_state) == {"orders_source", "documents_source"}
    assert glue_state["orders_source"].source_kind == "files"
    assert glue_state["orders_source"].state["files_total"] == 3
    read = {f.path.rsplit("/", 1)[-1] for f in store.processed_files(
        "glue_orders", "orders_source")}
    assert read == {"batch-00001.json", "batch-00002.json", "batch-00003.json"}

    # A native job reading the same files records the same bookmark (its high-water time
    # is the time of its own run) and the same processed files.
    import yaml

    from framework import load_settings, run_job

    conf = tmp_path / "conf"
    (conf / "jobs").mkdir(parents=True)
    (conf / "jobs" / "native.yaml").write_text(yaml.safe_dump({
        "class": f"{Path(__file__).with_name('support_jobs.py')}:CopyFiles",
        "params": {"landing": str(paths["orders"]), "target": str(tmp_path / "native"),
                   "ctx": "orders_source"}}))
    run_job(load_settings(conf_dir=conf, state_root=paths["state"]), "native", spark=spark)
    [native] = store.bookmarks("native")
    glue = glue_state["orders_source"]
    assert (native.source_kind, native.state["files_total"], native.state["bytes_total"]) \
        == (glue.source_kind, glue.state["files_total"], glue.state["bytes_total"])

    def files(job):
        return {(f.path, f.size, f.modified_ms) for f in store.processed_files(
            job, "orders_source")}

    assert files("native") == files("glue_orders")


def test_without_job_commit_the_bookmarks_stay_and_deltamark_warns(spark, glue_project,
                                                                   tmp_path, caplog):
    paths, land, run = glue_project
    script = tmp_path / "no_commit.py"
    script.write_text(SCRIPT.read_text().replace("job.commit()", ""))
    land()
    with caplog.at_level("WARNING"):
        assert run(script=script)["inputs"]["orders_source"]["files"] == 1
    assert "never called job.commit()" in caplog.text
    assert run(script=script)["inputs"]["orders_source"]["files"] == 1  # read again
    from framework.state.table_io import open_store

    assert open_store(paths["state"]).bookmarks("glue_orders") == []


def test_glues_default_mode_is_disable_and_unsupported_calls_say_what_to_use(
        spark, glue_project, tmp_path):
    paths, land, run = glue_project
    land()
    assert run(bookmark=None)["mode"] == "disable"
    assert run(bookmark=None)["inputs"]["orders_source"]["files"] == 1
    script = tmp_path / "catalog.py"
    script.write_text("from framework.glue.context import GlueContext\n"
                      "GlueContext().create_dynamic_frame.from_catalog(database='sales', "
                      "table_name='orders')\n")
    result = CliRunner().invoke(app, ["--state-root", str(paths["state"]), "run", "--script",
                                      str(script), "--arg", "JOB_NAME=catalog"])
    assert result.exit_code == 1
    assert "create_dynamic_frame.from_catalog(sales.orders): no such table under catalog: " \
        "in conf/deltamark.yaml (tables there: none)" in result.output
    for call, message in [
            ("write_dynamic_frame.from_jdbc_conf(frame=None, catalog_connection='', "
             "connection_options={'dbtable': 't'})",
             "write_dynamic_frame.from_jdbc_conf(catalog_connection='') without "
             "connectionName and dbtable: not supported by deltamark's Glue layer; name a "
             "connection of conf/deltamark.yaml"),
            ("write_dynamic_frame_from_options(frame=None, connection_type='postgresql', "
             "connection_options={'connectionName': 'pg', 'dbtable': 't', 'password': 'x'})",
             "write_dynamic_frame.from_options(connection_type='postgresql') with credentials "
             "in connection_options: not supported"),
            ("getSource('s3')", "GlueContext.getSource: not supported by deltamark's Glue "
             "layer; the calls served are listed in docs/glue.md."),
            # Glue Studio's Redshift upsert: SQL around the write deltamark would not run
            ("write_dynamic_frame.from_options(frame=None, connection_type='redshift', "
             "connection_options={'connectionName': 'rs', 'dbtable': 't_temp', "
             "'postactions': 'MERGE INTO t USING t_temp ...'})",
             "write_dynamic_frame.from_options(connection_type='redshift') with postactions: "
             "not supported by deltamark's Glue layer; deltamark appends the frame exactly "
             "once and runs no SQL around it"),
            ("create_dynamic_frame.from_options('s3', {'paths': ['/tmp/x']}, format='json', "
             "format_options={'jsonPath': '$.value[*]'})",
             "format_options 'jsonPath': not supported by deltamark's Glue layer; read the "
             "JSON whole")]:
        script.write_text("from framework.glue.context import GlueContext\n"
                          f"GlueContext().{call}\n")
        result = CliRunner().invoke(app, ["--state-root", str(paths["state"]), "run",
                                          "--script", str(script), "--arg", "JOB_NAME=calls"])
        assert result.exit_code == 1 and message in result.output, result.output


@pytest.mark.compat
def test_dynamic_frame_methods(spark):
    from framework.glue import DynamicFrame

    df = spark.createDataFrame([(1, "a", "10"), (2, "b", "20"), (3, "c", "x")],
                               "id BIGINT, name STRING, amount STRING")
    frame = DynamicFrame.fromDF(df, None, "orders")
    assert frame.count() == 3
    assert frame.select_fields(["id", "missing"]).toDF().columns == ["id"]
    assert frame.drop_fields(["name"]).toDF().columns == ["id", "amount"]
    assert frame.rename_field("name", "label").toDF().columns == ["id", "label", "amount"]
    assert [r.id for r in frame.filter(lambda r: r["id"] > 1).toDF().collect()] == [2, 3]
    cast = frame.resolveChoice(specs=[("amount", "cast:long")]).toDF()
    assert dict(cast.dtypes)["amount"] == "bigint"
    assert [r.amount for r in cast.orderBy("id").collect()] == [10, 20, None]
    with pytest.raises(GlueUnsupportedError, match="give database= and table_name="):
        frame.resolveChoice(specs=[("amount", "match_catalog")])
    with pytest.raises(GlueUnsupportedError, match="both missing, add one"):
        frame.resolveChoice()
    # choice= resolves choice fields only: a frame without them is as it was
    assert frame.resolveChoice(choice="cast:long").toDF().dtypes == df.dtypes
    nested = DynamicFrame.fromDF(spark.createDataFrame(
        [(1, [10, 20])], "id BIGINT, tags ARRAY<INT>"), None, "t")
    tables = nested.relationalize("root", "/tmp/unused")
    assert tables.keys() == ["root", "root_tags"] and len(tables) == 2
    assert tables["root_tags"].count() == 2
    # a Glue method deltamark does not serve: the one-line error, and hasattr says False
    with pytest.raises(GlueUnsupportedError, match=r"DynamicFrame.getNumPartitions: not "
                       "supported by deltamark's Glue layer; the calls served are listed"):
        frame.getNumPartitions()
    assert not hasattr(frame, "getNumPartitions")


@pytest.mark.compat
def test_join_keeps_both_frames_fields_as_glue_names_them(spark):
    """Glue's join keeps every field of both frames: where both records have a field of
    the same name, the second frame's is ``.name`` (a key of the same name on both sides
    always is), as Glue Studio's jobs show; where only one has it, it keeps its name."""
    from framework.glue import DynamicFrame
    from framework.glue.transforms import Join

    devices = DynamicFrame.fromDF(spark.createDataFrame(
        [("s1", "ann@x", None), ("s2", "bo@x", "2024-01-02"), ("s3", "cy@x", None)],
        "serialNumber STRING, email STRING, seen STRING"), None, "devices")
    readings = DynamicFrame.fromDF(spark.createDataFrame(
        [("s1", None, "2024-01-01", 7), ("s2", "b@y", "2024-01-03", 8), (None, "z", None, 9)],
        "serialNumber STRING, email STRING, seen STRING, value INT"), None, "readings")
    joined = Join.apply(frame1=devices, frame2=readings, keys1=["serialNumber"],
                        keys2=["serialNumber"]).toDF()
    assert joined.columns == ["serialNumber", "email", "seen", ".serialNumber", ".email",
                              ".seen", "value"]
    assert sorted(map(tuple, joined.collect())) == [
        ("s1", "ann@x", "2024-01-01", "s1", None, None, 7),
        ("s2", "bo@x", "2024-01-02", "s2", "b@y", "2024-01-03", 8)]
    # a shared field no joined record has on both sides keeps one name; Glue Studio's
    # scripts drop a renamed field by its quoted name
    only_one = readings.drop_fields(["email"]).join("serialNumber", "serialNumber", devices)
    assert only_one.toDF().columns == ["serialNumber", "seen", "value", ".serialNumber",
                                       "email", ".seen"]
    assert only_one.drop_fields(["`.serialNumber`", "`.seen`"]).toDF().columns == [
        "serialNumber", "seen", "value", "email"]
    # the same name with other types: kept apart whole
    typed = DynamicFrame.fromDF(spark.createDataFrame([("s1", 1)], "sn STRING, value BIGINT"),
                                None, "typed")
    assert typed.join("sn", "serialNumber", readings).toDF().dtypes[-1] == (".value", "int")


def test_glue_ml_transforms_name_the_call_and_the_alternative():
    from framework.glue.ml import FindMatches

    with pytest.raises(GlueUnsupportedError) as exc:
        FindMatches.apply(frame=None, transformId="tfm-1")
    assert exc.value.call == "FindMatches.apply"
    assert "pyspark.ml" in str(exc.value)


DATABASE_SCRIPT = '''
import sys
from framework.glue.utils import getResolvedOptions
from framework.glue.context import GlueContext
from framework.glue.dynamicframe import DynamicFrame
from framework.glue.job import Job

args = getResolvedOptions(sys.argv, ["JOB_NAME", "upstream", "target"])
glueContext = GlueContext(None)
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
customers = glueContext.create_dynamic_frame.from_options(
    connection_type="jdbc",
    connection_options={"connectionName": "shop", "dbtable": "customers",
                        "jobBookmarkKeys": ["id"], "jobBookmarkKeysSortOrder": "asc"},
    transformation_ctx="customers_source")
upstream = glueContext.create_data_frame.from_options(
    connection_type="delta", connection_options={"path": args["upstream"]},
    transformation_ctx="upstream_source")
glueContext.write_dynamic_frame.from_options(
    frame=customers, connection_type="s3",
    connection_options={"path": args["target"] + "/customers"}, format="glueparquet")
glueContext.write_dynamic_frame.from_options(
    frame=DynamicFrame.fromDF(upstream, glueContext, "upstream"), connection_type="s3",
    connection_options={"path": args["target"] + "/upstream"}, format="delta")
job.commit()
'''


def test_a_glue_script_reads_a_database_and_a_delta_table_incrementally(spark, tmp_path):
    import yaml
    from databases import available_jars, sqlite_database

    from framework.delta import delta_engine

    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
               "INSERT INTO customers VALUES (1, 'ana'), (2, 'bo'), (3, 'cy')")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"), "connections": {"shop": {"url": db.url}},
        "spark": {"conf": {"spark.jars": ",".join(available_jars())}}}))
    engine, upstream = delta_engine(spark, mode="embedded"), str(tmp_path / "upstream")
    engine.write(spark.createDataFrame([(1,), (2,)], "n BIGINT"), upstream)
    script = tmp_path / "database_script.py"
    script.write_text(DATABASE_SCRIPT)

    def run():
        result = CliRunner().invoke(app, [
            "--conf-dir", str(conf), "run", "--script", str(script), "--json",
            "--arg", "JOB_NAME=db_glue", "--arg", "job-bookmark-option=job-bookmark-enable",
            "--arg", f"upstream={upstream}", "--arg", f"target={tmp_path / 'lake'}"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])["inputs"]

    first = run()
    assert first["customers_source"]["rows"] == 3 and first["upstream_source"]["to_version"] == 0
    db.execute("INSERT INTO customers VALUES (4, 'di'), (5, 'ed')")
    engine.write(spark.createDataFrame([(3,)], "n BIGINT"), upstream)
    second = run()
    assert second["customers_source"]["rows"] == 2
    assert (second["upstream_source"]["from_version"], second["upstream_source"]["to_version"]) \
        == (1, 1)
    customers = spark.read.parquet(str(tmp_path / "lake" / "customers"))  # plain Parquet
    assert sorted(r.id for r in customers.collect()) == [1, 2, 3, 4, 5]
    assert sorted(r.n for r in engine.read(str(tmp_path / "lake" / "upstream")).collect()) \
        == [1, 2, 3]


# The header of every script Glue's console generates, as published in AWS's docs, and a
# body of the transforms such scripts chain; unchanged but for its data locations.
CONSOLE_SCRIPT = '''\
import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from awsglue.context import GlueContext
from awsglue.job import Job

args = getResolvedOptions(sys.argv, ['JOB_NAME', 'source', 'target', 'format'])
sc = SparkContext()
glueContext = GlueContext(sc)
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args['JOB_NAME'], args)

datasource0 = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args['source']]}, format="json",
    transformation_ctx="datasource0")
applymapping1 = ApplyMapping.apply(frame=datasource0, mappings=[
    ("id", "string", "order_id", "long"), ("customer.name", "string", "customer", "string"),
    ("amount", "string", "amount", "double"), ("note", "string", "note", "string")],
    transformation_ctx="applymapping1")
filtered = Filter.apply(frame=applymapping1, f=lambda r: r["amount"] > 10)
dropnull = DropNullFields.apply(frame=filtered, transformation_ctx="dropnull")
renamed = RenameField.apply(frame=dropnull, old_name="customer", new_name="customer_name")
print("Writing to", args['target'], "...")
glueContext.write_dynamic_frame.from_options(
    frame=renamed, connection_type="s3", connection_options={"path": args['target']},
    format=args['format'], transformation_ctx="datasink4")
job.commit()
'''


@pytest.mark.parametrize("sink", ["parquet", "json", "csv"])
def test_a_console_generated_script_runs_unchanged_three_times(spark, tmp_path, sink):
    script, source, target = tmp_path / "job.py", tmp_path / "in", tmp_path / "out"
    script.write_text(CONSOLE_SCRIPT)
    source.mkdir()

    def land(name, *orders):
        (source / name).write_text("".join(json.dumps(
            {"id": str(i), "customer": {"name": f"c{i}"}, "amount": str(amount),
             "note": None}) + "\n" for i, amount in orders))

    def run():
        result = CliRunner().invoke(app, [
            "--state-root", str(tmp_path / "state"), "run", "--script", str(script), "--json",
            "--arg", "JOB_NAME=console", "--arg", f"source={source}",
            "--arg", f"target={target}", "--arg", f"format={sink}",
            "--arg", "job-bookmark-option=job-bookmark-enable"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)  # the report alone: the script's print is on stderr

    def rows():
        schema = "order_id BIGINT, customer_name STRING, amount DOUBLE"
        df = spark.read.format(sink).options(header="true").schema(schema).load(str(target))
        if sink == "parquet":  # note, null everywhere, is gone
            assert spark.read.parquet(str(target)).columns == df.columns
        return sorted(tuple(r) for r in df.collect())

    land("a.json", (1, 5), (2, 50), (3, "x"))
    assert run()["status"] == "succeeded"
    assert "awsglue" not in sys.modules  # importable for the script only
    assert rows() == [(2, "c2", 50.0)]  # 5 is filtered out; "x" casts to null, then fails f
    assert run()["status"] == "skipped"
    land("b.json", (4, 40))
    assert run()["inputs"]["datasource0"]["files"] == 1
    assert rows() == [(2, "c2", 50.0), (4, "c4", 40.0)]


CHOICE_SCRIPT = '''import sys
from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["JOB_NAME", "source", "target"])
glueContext = GlueContext(SparkContext())
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
frame = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args["source"]]}, format="json",
    transformation_ctx="source")
glueContext.write_dynamic_frame.from_options(
    frame=frame.resolveChoice(choice="make_cols"), connection_type="s3",
    connection_options={"path": args["target"]}, format="json")
job.commit()
'''


def test_a_type_another_run_read_otherwise_makes_a_glue_choice_type(spark, tmp_path):
    script, source, target = tmp_path / "job.py", tmp_path / "in", tmp_path / "out"
    script.write_text(CHOICE_SCRIPT)
    source.mkdir()

    def run(name: str, *records: dict) -> dict:
        (source / name).write_text("".join(json.dumps(r) + "\n" for r in records))
        result = CliRunner().invoke(app, [
            "--state-root", str(tmp_path / "state"), "run", "--script", str(script), "--json",
            "--arg", "JOB_NAME=choices", "--arg", f"source={source}",
            "--arg", f"target={target}", "--arg", "job-bookmark-option=job-bookmark-enable"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    run("1.json", {"id": 1, "n": "a"})
    # id was a bigint: "4a" makes it a choice of long and string, as Glue's frames do
    report = run("2.json", {"id": "4a", "n": "b"}, {"id": 5, "n": "c"})
    assert report["schema_changes"] == {"source": ["id: a choice of bigint and string "
                                                   "(1 value not of its type)"]}
    rows = {r.n: r.asDict() for r in spark.read.json(str(target)).collect()}
    assert {n: (r.get("id"), r.get("id_long"), r.get("id_string")) for n, r in rows.items()
            } == {"a": (1, None, None), "b": (None, None, "4a"), "c": (None, 5, None)}


def test_transforms_on_nested_fields_and_empty_frames(spark, tmp_path):
    from pyspark.sql.types import StructType

    from framework.glue import DynamicFrame
    from framework.glue.transforms import (
        ApplyMapping,
        DropFields,
        ErrorsAsDynamicFrame,
        FlatMap,
        Join,
        Map,
        MapToCollection,
        RenameField,
        ResolveChoice,
        SelectFromCollection,
        Spigot,
        SplitFields,
        SplitRows,
        Unbox,
        Union,
        UnnestFrame,
    )

    frame = DynamicFrame.fromDF(spark.createDataFrame(
        [(1, (2, "a")), (2, (3, "b"))], "id BIGINT, s STRUCT<x: INT, y: STRING>"), None, "f")
    assert DropFields.apply(frame, ["s.y"]).toDF().schema.simpleString() == \
        "struct<id:bigint,s:struct<x:int>>"
    moved = RenameField.apply(frame, "s.x", "s.z").toDF()
    assert moved.schema.simpleString() == "struct<id:bigint,s:struct<y:string,z:int>>"
    nested = ApplyMapping.apply(frame, [("s.x", "int", "out.value", "string"),
                                        ("id", "long", "id", "int")]).toDF()
    assert nested.schema.simpleString() == "struct<out:struct<value:string>,id:int>"
    other = DynamicFrame.fromDF(spark.createDataFrame([(1, "one")], "key BIGINT, label STRING"),
                                None, "o")
    joined = Join.apply(frame, other, "id", "key").toDF()
    assert [(r.id, r.key, r.label) for r in joined.collect()] == [(1, 1, "one")]
    assert sorted(r["id"] for r in Union.apply(frame, frame).toDF().collect()) == [1, 1, 2, 2]
    doubled = Map.apply(frame, lambda r: {"id": r["id"] * 2, "y": r["s"]["y"]}).toDF()
    assert sorted((r.id, r.y) for r in doubled.collect()) == [(2, "a"), (4, "b")]
    failing = Map.apply(frame, lambda r: {"id": 1 // (r["id"] - 1)})
    assert [r.id for r in failing.toDF().collect()] == [1]  # the record that raised: left out
    assert failing.errorsCount() == 1 and frame.errorsCount() == 0
    raising = frame.filter(lambda r: 1 // (r["id"] - 1) >= 0)
    assert raising.count() == 1 and raising.errorsCount() == 1
    assert Join.apply(other, failing, "key", "id").errorsCount() == 1
    assert frame.filter(lambda r: r["missing"] > 0).count() == 0  # KeyError: left out
    assert ResolveChoice.apply(frame, choice="make_cols").toDF().columns == ["id", "s"]
    collection = frame.relationalize("root")
    assert SelectFromCollection.apply(collection, "root").count() == 2
    # error records are kept, as Glue keeps them: the record and what it raised
    errors = ErrorsAsDynamicFrame.apply(frame=Join.apply(other, failing, "key", "id"))
    [error] = [r.error for r in errors.toDF().collect()]
    assert error.msg == "ZeroDivisionError: integer division or modulo by zero"
    assert error.dynamicRecord.id == 1 and "ZeroDivisionError" in error.stackTrace
    assert 'test_glue.py", line' in error.callsite.site
    assert failing.stageErrorsCount() == 1
    assert failing.select_fields(["id"]).stageErrorsCount() == 0
    both = Union.apply(failing, raising).errorsAsDynamicFrame().toDF()
    assert both.count() == 2 and ErrorsAsDynamicFrame.apply(frame).toDF().count() == 0
    flat = UnnestFrame.apply(frame).toDF()
    assert flat.columns == ["id", "s.x", "s.y"] and flat.orderBy("id").first()["s.x"] == 2
    parts = SplitFields.apply(frame, ["s.y"], "ys", "rest")
    assert parts["ys"].toDF().schema.simpleString() == "struct<s:struct<y:string>>"
    assert parts["rest"].toDF().schema.simpleString() == "struct<id:bigint,s:struct<x:int>>"
    rows = SplitRows.apply(frame, {"s.x": {">": 2}, "id": {"<=": 5}}, "big", "small")
    assert [r.id for r in rows["big"].toDF().collect()] == [2]
    assert [r.id for r in rows["small"].toDF().collect()] == [1]
    boxed = DynamicFrame.fromDF(spark.createDataFrame(
        [(1, '{"a": 1, "b": ["x"]}'), (2, None)], "id BIGINT, doc STRING"), None, "b")
    unboxed = Unbox.apply(boxed, "doc", "json").toDF()
    assert unboxed.schema["doc"].dataType.simpleString() == "struct<a:bigint,b:array<string>>"
    assert [r.doc.a if r.doc else None for r in unboxed.orderBy("id").collect()] == [1, None]
    lines = DynamicFrame.fromDF(spark.createDataFrame(
        [(1, "a|b"), (2, 'c|"d|e"|f'), (3, None)], "id BIGINT, line STRING"), None, "l")
    unboxed = Unbox.apply(lines, "line", "csv", separator="|").toDF()
    assert unboxed.schema["line"].dataType.simpleString() == \
        "struct<col0:string,col1:string,col2:string>"
    assert [tuple(r.line) if r.line else None for r in unboxed.orderBy("id").collect()] == [
        ("a", "b", None), ("c", "d|e", "f"), None]
    with pytest.raises(GlueUnsupportedError, match="unbox JSON or CSV"):
        Unbox.apply(lines, "line", "csv", withHeader=True)
    stage = DynamicFrame.fromDF(spark.createDataFrame([(2, (30, "new"))], frame.toDF().schema),
                                None, "stage")
    merged = frame.mergeDynamicFrame(stage, ["id"]).toDF()
    assert sorted((r.id, r.s.y) for r in merged.collect()) == [(1, "a"), (2, "new")]
    sample = tmp_path / "spigot"
    assert Spigot.apply(frame, str(sample), {"topk": 1}) is frame
    assert spark.read.json(str(sample)).count() == 1
    per_frame = MapToCollection.apply(parts, lambda f, name: f.repartition(1))
    assert per_frame.keys() == ["ys", "rest"]
    flat_mapped = FlatMap.apply(parts, SplitRows, comparison_dict={"id": {">": 1}})
    assert flat_mapped.keys() == ["ys_frame1", "ys_frame2", "rest_frame1", "rest_frame2"]

    # A run with nothing new hands a script a frame with no fields: every transform takes it.
    empty = DynamicFrame.fromDF(spark.createDataFrame([], StructType([])), None, "e")
    chained = ApplyMapping.apply(empty, [("id", "string", "id", "long")])
    chained = RenameField.apply(DropFields.apply(chained, ["x"]), "id", "key")
    assert chained.toDF().columns == [] and chained.count() == 0
    assert Join.apply(empty, other, "id", "key").count() == 0
    assert Map.apply(empty, lambda r: r).count() == 0
    assert empty.drop_null_fields().count() == 0
    assert Union.apply(empty, other).toDF().columns == ["key", "label"]


# the header of CMS's Inpatient Prospective Payment System file the samples read, spaces
# and all, and the columns Glue's crawler catalogued for it (resolve_choice.md prints them)
MEDICARE_HEADER = ["DRG Definition", "Provider Id", "Provider Name", "Provider Street Address",
                   "Provider City", "Provider State", "Provider Zip Code",
                   "Hospital Referral Region Description", " Total Discharges ",
                   " Average Covered Charges ", " Average Total Payments ",
                   "Average Medicare Payments"]
MEDICARE_COLUMNS = {"drg definition": "string", "provider id": "bigint",
                    "provider name": "string", "provider street address": "string",
                    "provider city": "string", "provider state": "string",
                    "provider zip code": "bigint",
                    "hospital referral region description": "string",
                    "total discharges": "bigint", "average covered charges": "string",
                    "average total payments": "string", "average medicare payments": "string"}


@pytest.fixture
def medicare_catalog(tmp_path):
    """CMS's Medicare data (as in AWS's samples) in a local catalog as payments.medicare, its
    columns named as Glue's crawler names them; returns the conf directory."""
    import csv

    import yaml

    medicare = tmp_path / "medicare"
    medicare.mkdir()
    with open(medicare / "Medicare_Hospital_Provider.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(MEDICARE_HEADER)
        writer.writerow(["039 - EXTRACRANIAL PROCEDURES W/O CC/MCC", "10001",
                         "SOUTHEAST ALABAMA MEDICAL CENTER", "1108 ROSS CLARK CIRCLE", "DOTHAN",
                         "AL", "36301", "AL - Dothan", "91", "$32963.07", "$5777.24",
                         "$4763.73"])
        writer.writerow(["039 - EXTRACRANIAL PROCEDURES W/O CC/MCC", "10005",
                         "MARSHALL MEDICAL CENTER SOUTH", "2505 U S HIGHWAY 431 NORTH", "BOAZ",
                         "AL", "35957", "AL - Birmingham", "14", "$15131.85", "$5787.57",
                         "$4976.71"])
        writer.writerow(["039 - EXTRACRANIAL PROCEDURES W/O CC/MCC", "not a number",
                         "A PROVIDER WITH A BAD ID", "", "", "AL", "0", "", "1", "$1.00",
                         "$1.00", "$1.00"])
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"),
        "catalog": {"payments.medicare": {"location": str(medicare), "format": "csv",
                                          "options": {"withHeader": True},
                                          "columns": MEDICARE_COLUMNS}}}))
    return conf


def run_published(conf, tmp_path, name, replace):
    """Run the published script ``name``, its data locations replaced (``replace``)."""
    text = (Path(__file__).with_name("glue_scripts") / name).read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    script = tmp_path / name
    script.write_text(text)
    return CliRunner().invoke(app, ["--conf-dir", str(conf), "run", "--script", str(script),
                                    "--arg", f"JOB_NAME={script.stem}"])


@pytest.mark.compat
def test_aws_glue_samples_data_cleaning_script_runs_on_a_local_catalog(
        spark, tmp_path, medicare_catalog):
    """aws-glue-samples' data_cleaning_and_lambda.py, as published but for its output
    location: from_catalog reads the table conf's catalog declares."""
    output = tmp_path / "medicare_parquet"
    result = run_published(medicare_catalog, tmp_path, "data_cleaning_and_lambda.py", {
        "s3://glue-sample-target/output-dir/medicare_parquet": str(output)})
    assert result.exit_code == 0, result.output
    rows = spark.read.parquet(str(output))
    assert rows.schema.simpleString() == (
        "struct<drg:string,provider:struct<id:bigint,name:string,city:string,state:string,"
        "zip:bigint>,rr:string,charges:struct<covered:double,total_pay:double,"
        "medicare_pay:double>>")
    assert sorted((r.provider.id, r.provider.zip, r.charges.covered, r.charges.medicare_pay)
                  for r in rows.collect()) == [(10001, 36301, 32963.07, 4763.73),
                                               (10005, 35957, 15131.85, 4976.71)]

    result = run_published(medicare_catalog, tmp_path, "data_cleaning_and_lambda.py",
                           {'tbl_name = "medicare"': 'tbl_name = "medicaid"'})
    assert result.exit_code == 1
    assert ("create_dynamic_frame.from_catalog(payments.medicaid): no such table under "
            "catalog: in conf/deltamark.yaml (tables there: payments.medicare)") in result.output


def test_aws_glue_samples_resolve_choice_script_writes_json(spark, tmp_path, medicare_catalog):
    """aws-glue-samples' resolve_choice.py: five JSON sinks of resolveChoice's actions and a
    Spark SQL query, as published but for its output locations."""
    out = tmp_path / "out"
    result = run_published(medicare_catalog, tmp_path, "resolve_choice.py", {
        "s3://glue-sample-target/output-dir/": f"{out}/"})
    assert result.exit_code == 0, result.output

    def rows(name):
        return spark.read.json(str(out / name)).collect()

    def ids(name):
        return sorted((r["provider id"] is None, r["provider id"]) for r in rows(name))

    assert ids("medicare_json_cast") == [(False, 10001), (False, 10005), (True, None)]
    assert ids("medicare_json_project") == ids("medicare_json_cast")
    # provider id is a choice of long and string, as the sample's README shows it
    assert sorted((r["provider id_long"] or 0, r["provider id_string"] or "")
                  for r in rows("medicare_json_make_cols")) == [
        (0, "not a number"), (10001, ""), (10005, "")]
    assert sorted((r["provider id"]["long"] or 0, r["provider id"]["string"] or "")
                  for r in rows("medicare_json_make_struct")) == [
        (0, "not a number"), (10001, ""), (10005, "")]
    assert ids("medicare_json_sql") == [(False, "10001")]  # total discharges > 30


def test_relationalized_frames_named_with_a_dot_are_written_where_the_script_says(
        spark, tmp_path):
    """aws-glue-samples' join_and_relationalize.py on legislators-shaped data whose joined
    organizations carry links, writing each flat table to ``<dir>/<frame name>`` as Delta:
    the joined frame has ``.links``, Relationalize names its child frame
    ``hist_root_.links`` (as Glue does), and that is the table's directory."""
    from test_jdbc_sink import legislators_conf

    from framework.delta.log import is_table

    conf = legislators_conf(tmp_path, [
        {"person_id": "p1", "organization_id": "party/d", "role": "member"}])
    out = tmp_path / "out"
    result = run_published(conf, tmp_path, "join_and_relationalize.py", {
        "s3://glue-sample-target/": f"{tmp_path}/",
        'glueContext.write_dynamic_frame.from_jdbc_conf(frame = m_df, catalog_connection = '
        '"redshift3", connection_options = {"dbtable": df_name, "database": "testdb"}, '
        'redshift_tmp_dir = redshift_temp_dir)':
        'glueContext.write_dynamic_frame.from_options(frame = m_df, connection_type = "s3", '
        f'connection_options = {{"path": "{out}/" + df_name}}, format = "delta")'})
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in out.iterdir())
    assert "hist_root_.links" in written and "hist_root_links" in written, written
    assert all(is_table(str(out / name)) for name in written)
    def urls(name):
        table = spark.read.format("delta").load(str(out / name))
        return [r[-1] for r in table.collect()]  # its last column: the url

    # the second frame's (the persons') field is .links, the organizations' keeps its name
    assert urls("hist_root_.links") == ["https://en.wikipedia.org/wiki/Ann"]
    assert urls("hist_root_links") == ["https://example.org/d"]


MATCH_CATALOG_SCRIPT = """\
from awsglue.context import GlueContext
from awsglue.transforms import ApplyMapping, ResolveChoice
glueContext = GlueContext()
datasource0 = glueContext.create_dynamic_frame.from_catalog(database="payments",
                                                            table_name="medicare")
applymapping1 = ApplyMapping.apply(frame=datasource0, mappings=[
    ("provider id", "choice", "provider id", "choice"),
    ("provider zip code", "long", "zip", "long"),
    ("total discharges", "long", "discharges", "int")])
resolvechoice2 = ResolveChoice.apply(frame=applymapping1, choice="MATCH_CATALOG",
                                     database="payments", table_name="providers")
resolvechoice3 = ResolveChoice.apply(frame=resolvechoice2, choice="make_cols")
glueContext.write_dynamic_frame.from_catalog(frame=resolvechoice3, database="payments",
                                             table_name="providers")
"""


def test_a_console_script_matches_the_catalog_and_makes_columns_of_choices(
        spark, tmp_path, medicare_catalog):
    """The pipeline Glue's console generated for catalog targets (ApplyMapping,
    ResolveChoice MATCH_CATALOG, then make_cols, write_dynamic_frame.from_catalog): the
    choice column takes the target table's type."""
    conf = yaml.safe_load((medicare_catalog / "deltamark.yaml").read_text())
    target = tmp_path / "providers"
    conf["catalog"]["payments.providers"] = {
        "location": str(target), "format": "parquet",
        "columns": {"provider id": "bigint", "zip": "bigint", "discharges": "int"}}
    (medicare_catalog / "deltamark.yaml").write_text(yaml.safe_dump(conf))
    script = tmp_path / "console.py"
    script.write_text(MATCH_CATALOG_SCRIPT)
    result = CliRunner().invoke(app, ["--conf-dir", str(medicare_catalog), "run", "--script",
                                      str(script), "--arg", "JOB_NAME=console"])
    assert result.exit_code == 0, result.output
    written = spark.read.parquet(str(target))
    assert dict(written.dtypes) == {"provider id": "bigint", "zip": "bigint",
                                    "discharges": "int"}
    assert sorted((r["provider id"] or 0, r.zip) for r in written.collect()) == [
        (0, 0), (10001, 36301), (10005, 35957)]


STUDIO_SCRIPT = Path(__file__).with_name("glue_scripts") / "studio_s3_change_schema_s3.py"


def test_a_studio_generated_script_writes_through_get_sink(spark, tmp_path):
    script, source, target = tmp_path / "studio.py", tmp_path / "in", tmp_path / "out"
    script.write_text(STUDIO_SCRIPT.read_text())
    source.mkdir()

    def run(path=script, **extra):
        result = CliRunner().invoke(app, [
            "--state-root", str(tmp_path / "state"), "run", "--script", str(path),
            "--arg", f"JOB_NAME={path.stem}", "--arg", f"source={source}",
            "--arg", f"target={target}", "--arg", "job-bookmark-option=job-bookmark-enable",
            *[word for k, v in extra.items() for word in ("--arg", f"{k}={v}")]])
        return result

    for batch in (1, 2):
        (source / f"{batch}.json").write_text(json.dumps({"id": str(batch), "amount": "2.5"}))
        assert run().exit_code == 0
    assert sorted(tuple(r) for r in spark.read.parquet(str(target)).collect()) == [
        (1, 2.5), (2, 2.5)]

    purge = tmp_path / "purge.py"
    purge.write_text("import sys\nfrom awsglue.context import GlueContext\n"
                     "from awsglue.utils import getResolvedOptions\n"
                     "args = getResolvedOptions(sys.argv, ['JOB_NAME', 'target'])\n"
                     "GlueContext().purge_s3_path(args['target'], {'retentionPeriod': 0})\n")
    assert run(purge).exit_code == 0
    assert not [p for p in target.rglob("*") if p.is_file()]
    from framework.delta import delta_engine

    delta_engine(spark, mode="embedded").write(spark.range(1), str(target / "delta"))
    refused = run(purge, target=str(target / "delta"))
    assert refused.exit_code == 1 and "on a Delta table: not supported" in refused.output


STUDIO_DQ_SCRIPT = Path(__file__).with_name("glue_scripts") / "studio_s3_data_quality_s3.py"


def test_a_studio_script_with_data_quality_nodes_runs_unchanged(spark, tmp_path):
    """Glue Studio's data-quality nodes (awsgluedq's EvaluateDataQuality): one fails the
    job, one routes rows by their row-level outcomes, the default ruleset checks the target;
    first files, nothing new, a new file, then a file that fails the job."""
    from framework.state.table_io import open_store

    script, source = tmp_path / "studio_dq.py", tmp_path / "in"
    target, rejected, state = tmp_path / "out", tmp_path / "rejected", tmp_path / "state"
    script.write_text(STUDIO_DQ_SCRIPT.read_text())
    source.mkdir()

    def run():
        return CliRunner().invoke(app, [
            "--state-root", str(state), "run", "--script", str(script), "--json",
            "--arg", "JOB_NAME=studio_dq", "--arg", f"source={source}",
            "--arg", f"target={target}", "--arg", f"rejected={rejected}",
            "--arg", "job-bookmark-option=job-bookmark-enable"])

    def written():
        return (sorted(tuple(r) for r in spark.read.parquet(str(target)).collect()),
                sorted(((r.order_id, r.DataQualityRulesFail, r.DataQualityRulesSkip)
                        for r in spark.read.json(str(rejected)).collect()),
                       key=lambda r: (r[0] is None, r[0] or 0)))

    amount = 'ColumnValues "amount" between 0 and 10000'
    status = 'ColumnValues "status" in ["new", "paid", "shipped"]'
    # 0 is outside DQDL's between (its bounds are excluded)
    (source / "1.csv").write_text("order_id,status,amount\n1,new,10.5\n2,paid,-3\n"
                                  "3,lost,7\n5,shipped,0\n6,paid,9999.5\n")
    first = run()
    assert first.exit_code == 0, first.output
    assert written() == ([(1, "new", 10.5), (6, "paid", 9999.5)], [
        (2, [amount], ["RowCount > 0"]), (3, [status], ["RowCount > 0"]),
        (5, [amount], ["RowCount > 0"])])
    results = {(r.ruleset, r.rule): r for r in open_store(state).dq_results("studio_dq")}
    assert {k: (r.outcome, r.rows) for k, r in results.items()} == {
        ("EvaluateDataQuality_node1700000000003", "ColumnCount = 3"): ("passed", 5),
        ("EvaluateDataQuality_node1700000000003", 'Completeness "order_id" > 0.5'):
            ("passed", 5),
        ("EvaluateDataQuality_node1700000000012", 'IsComplete "order_id"'): ("passed", 5),
        ("EvaluateDataQuality_node1700000000012", amount): ("failed", 5),
        ("EvaluateDataQuality_node1700000000012", status): ("failed", 5),
        ("EvaluateDataQuality_node1700000000012", "RowCount > 0"): ("passed", 5),
        ("EvaluateDataQuality_node1700000000008", "ColumnCount > 0"): ("passed", 2)}
    assert results["EvaluateDataQuality_node1700000000012", amount].unexpected_count == 2

    nothing_new = run()
    assert nothing_new.exit_code == 0, nothing_new.output
    assert json.loads(nothing_new.output)["status"] == "skipped"  # nothing new to read
    assert len(written()[0]) == 2 and len(written()[1]) == 3

    (source / "2.csv").write_text("order_id,status,amount\n7,shipped,1\n8,new,2\n,new,5\n")
    assert run().exit_code == 0
    rows, refused = written()
    assert [r[0] for r in rows] == [1, 6, 7, 8]
    assert (None, ['IsComplete "order_id"'], ["RowCount > 0"]) in refused

    # the node that fails the job: two rows in three have no order_id
    (source / "3.csv").write_text("order_id,status,amount\n,new,1\n,new,2\n9,new,3\n")
    failed = run()
    assert failed.exit_code == 1
    assert "The job failed due to failing DQ rules for node" in failed.output
    assert written() == (rows, refused)


STUDIO_NULLS_SCRIPT = Path(__file__).with_name("glue_scripts") / "studio_s3_drop_null_fields_s3.py"


def test_a_studio_drop_null_fields_node_walks_the_schema_with_gluetypes(spark, tmp_path):
    """Studio's Drop Null Fields node walks frame.schema() with awsglue.gluetypes' classes
    and drops, nested paths too, the fields holding only its null values."""
    script, source, target = tmp_path / "nulls.py", tmp_path / "in", tmp_path / "out"
    script.write_text(STUDIO_NULLS_SCRIPT.read_text())
    source.mkdir()

    def run():
        return CliRunner().invoke(app, [
            "--state-root", str(tmp_path / "state"), "run", "--script", str(script),
            "--arg", "JOB_NAME=nulls", "--arg", f"source={source}", "--arg", f"target={target}",
            "--arg", "job-bookmark-option=job-bookmark-enable"])

    def written():
        return sorted(json.dumps(json.loads(line), sort_keys=True)
                      for part in target.glob("*.json") for line in part.read_text().splitlines())

    (source / "1.json").write_text(
        '{"id": 1, "name": "a", "note": "null", "score": -1, "meta": {"code": "", "level": 2}}\n'
        '{"id": 2, "name": "b", "note": " ", "score": -1, "meta": {"code": "null", "level": 3}}')
    assert run().exit_code == 0
    first = ['{"id": 1, "meta": {"level": 2}, "name": "a"}',
             '{"id": 2, "meta": {"level": 3}, "name": "b"}']
    assert written() == first
    assert run().exit_code == 0  # nothing new
    assert written() == first
    (source / "2.json").write_text(
        '{"id": 3, "name": "c", "note": "hi", "score": 5, "meta": {"code": "x", "level": 4}}')
    assert run().exit_code == 0
    assert written() == sorted([*first, '{"id": 3, "meta": {"code": "x", "level": 4}, '
                                         '"name": "c", "note": "hi", "score": 5}'])


DQ_APPLY_SCRIPT = """\
import json
import sys
from awsglue.context import GlueContext
from awsglue.dynamicframe import DynamicFrame
from awsglue.utils import getResolvedOptions
from awsgluedq.transforms import EvaluateDataQuality

args = getResolvedOptions(sys.argv, ["JOB_NAME", "ruleset", "out"])
glue = GlueContext()
people = glue.spark_session.createDataFrame([(1, "a"), (2, None), (3, "c")], "id long, name string")
outcomes = EvaluateDataQuality.apply(
    frame=DynamicFrame.fromDF(people, glue, "people"), ruleset=args["ruleset"],
    publishing_options={"dataQualityEvaluationContext": "people_dq",
                        "enableDataQualityResultsPublishing": False})
with open(args["out"], "w") as out:
    json.dump([row.asDict() for row in outcomes.toDF().collect()], out)
"""


def test_evaluate_data_quality_reports_each_rule_as_glue_does(spark, tmp_path):
    from framework.state.table_io import open_store

    script, out, state = tmp_path / "dq.py", tmp_path / "outcomes.json", tmp_path / "state"
    script.write_text(DQ_APPLY_SCRIPT)

    def run(ruleset):
        return CliRunner().invoke(app, [
            "--state-root", str(state), "run", "--script", str(script), "--arg", "JOB_NAME=dq",
            "--arg", f"ruleset={ruleset}", "--arg", f"out={out}"])

    result = run('Rules = [ RowCount = 3, IsComplete "name", Mean "id" > 2, IsComplete "nope" ]')
    assert result.exit_code == 0, result.output
    outcomes = {r["Rule"]: r for r in json.loads(out.read_text())}
    assert {rule: (r["Outcome"], r["FailureReason"], r["EvaluatedMetrics"])
            for rule, r in outcomes.items() if rule != 'IsComplete "nope"'} == {
        "RowCount = 3": ("Passed", None, {"Dataset.*.RowCount": 3.0}),
        'IsComplete "name"': ("Failed", "1 of 3 rows do not meet the rule",
                              {"Column.name.Completeness": pytest.approx(2 / 3)}),
        'Mean "id" > 2': ("Failed", "Value: 2.0 does not meet the constraint requirement",
                          {"Column.id.Mean": 2.0})}
    missing = outcomes['IsComplete "nope"']
    assert missing["Outcome"] == "Failed" and "nope" in missing["FailureReason"]
    assert open_store(state).dq_results("dq") == []  # publishing turned off

    refused = run('Rules = [ ReferentialIntegrity "id" "other.id" = 1.0 ]')
    assert refused.exit_code == 1
    assert ('EvaluateDataQuality ruleset of people_dq: ReferentialIntegrity "id" "other.id" = '
            "1.0: no reference data named 'other' (give it in additional_data_sources; "
            "given: none)") in refused.output


DQ_HISTORY_SCRIPT = """\
import json
import sys
from awsglue.context import GlueContext
from awsglue.dynamicframe import DynamicFrame
from awsglue.utils import getResolvedOptions
from awsgluedq.transforms import EvaluateDataQuality

args = getResolvedOptions(sys.argv, ["JOB_NAME", "ruleset", "out", "rows", "method"])
glue = GlueContext()
spark = glue.spark_session
orders = spark.createDataFrame([(i, f"c{i % 3}", float(i)) for i in range(int(args["rows"]))],
                               "id long, customer string, amount double")
customers = spark.createDataFrame([("c0", "Ann"), ("c1", "Bo")], "id string, name string")
dq = EvaluateDataQuality().process_rows(
    frame=DynamicFrame.fromDF(orders, glue, "orders"), ruleset=args["ruleset"],
    publishing_options={"dataQualityEvaluationContext": "orders_dq"},
    additional_options={"compositeRuleEvaluation.method": args["method"]},
    additional_data_sources={"customers": DynamicFrame.fromDF(customers, glue, "customers")})
with open(args["out"], "w") as out:
    json.dump([row.asDict() for row in dq["ruleOutcomes"].toDF().collect()], out)
"""

HISTORY_RULES = """Rules = [
    RowCount > avg(last(2)),
    ReferentialIntegrity "customer" "customers.id" = 1.0,
    RowCountMatch "customers" >= 1.0,
    AggregateMatch "sum(amount)" "sum(amount)" = 1.0,
    SchemaMatch "customers" = 1.0,
    CustomSql "select count(*) from primary p join customers c on p.customer = c.id" > 0,
    (ColumnValues "amount" > 0) or (ColumnValues "id" = 0)
]"""


def test_dynamic_rules_compare_with_earlier_runs_and_rules_read_reference_data(
        spark, tmp_path):
    """RowCount > avg(last(2)) reads the job's dq_results of the same context; rules
    read additional_data_sources by name; a composite is judged rule by rule unless
    compositeRuleEvaluation.method is ROW."""
    script, out, state = tmp_path / "dq.py", tmp_path / "outcomes.json", tmp_path / "state"
    script.write_text(DQ_HISTORY_SCRIPT)

    def run(rows, method="COLUMN"):
        result = CliRunner().invoke(app, [
            "--state-root", str(state), "run", "--script", str(script), "--arg",
            "JOB_NAME=orders", "--arg", f"ruleset={HISTORY_RULES}", "--arg", f"out={out}",
            "--arg", f"rows={rows}", "--arg", f"method={method}"])
        assert result.exit_code == 0, result.output
        return {r["Rule"]: (r["Outcome"], r["EvaluatedRule"], r["EvaluatedMetrics"])
                for r in json.loads(out.read_text())}

    first = run(3)
    assert first["RowCount > avg(last(2))"] == ("Passed", "RowCount > 0",
                                                {"Dataset.*.RowCount": 3.0})
    assert first['ReferentialIntegrity "customer" "customers.id" = 1.0'][::2] == (
        "Failed", {"Column.customers.ReferentialIntegrity": pytest.approx(2 / 3)})
    assert first['RowCountMatch "customers" >= 1.0'][::2] == (
        "Passed", {"Dataset.customers.RowCountMatch": 1.5})
    assert first['AggregateMatch "sum(amount)" "sum(amount)" = 1.0'][0] == "Passed"
    assert first['SchemaMatch "customers" = 1.0'][::2] == (
        "Failed", {"Dataset.customers.SchemaMatch": 0.0})
    assert first['CustomSql "select count(*) from primary p join customers c on '
                 'p.customer = c.id" > 0'][::2] == ("Passed", {"Dataset.*.CustomSQL": 2.0})
    composite = '(ColumnValues "amount" > 0) or (ColumnValues "id" = 0)'
    assert first[composite][0] == "Failed"  # each rule fails on the whole frame
    assert first[composite][2] == {"Column.amount.ColumnValues.Compliance": pytest.approx(2 / 3),
                                   "Column.id.ColumnValues.Compliance": pytest.approx(1 / 3)}

    second = run(6, method="ROW")
    assert second["RowCount > avg(last(2))"][:2] == ("Passed", "RowCount > 3")
    assert second[composite][0] == "Passed"  # row by row, every row meets one of them
    third = run(4)
    assert third["RowCount > avg(last(2))"][:2] == ("Failed", "RowCount > 4.5")


def test_the_docs_list_every_awsglue_call_as_the_code_provides_it():
    import inspect
    import re

    from framework.glue import DynamicFrame, transforms

    readme = (Path(__file__).parents[1] / "docs" / "glue.md").read_text()
    table = readme[readme.index("## The awsglue API"):]
    table = table[:table.index("\n\n", table.index("| awsglue |"))]
    rows = [line for line in table.splitlines() if line.startswith("| `") or "`" in line]

    def row_of(name):
        found = [r for r in rows if re.search(rf"`{re.escape(name)}`", r)]
        assert found, f"{name} is not in docs/glue.md's awsglue table"
        return found[0]

    methods = [n for n, _ in inspect.getmembers(DynamicFrame, inspect.isfunction)
               if not n.startswith("_")] + ["fromDF"]
    for name in methods:
        assert "not supported" not in row_of(name), name
    for name in transforms.__all__:
        provided = not issubclass(getattr(transforms, name), transforms.NotProvided)
        assert ("not supported" not in row_of(name)) == provided, name
    assert "not supported" not in row_of("EvaluateDataQuality")
    from framework.glue.studio import STUDIO_TRANSFORMS

    for name in STUDIO_TRANSFORMS:
        assert "not supported" not in row_of(name), name
    from framework.quality.dqdl import DQDL_RULE_TYPES

    rule_table = readme[readme.index("The DQDL rules evaluated"):readme.index("Not evaluated")]
    for kind in DQDL_RULE_TYPES:
        assert f"`{kind}" in rule_table, f"{kind} is not in docs/glue.md's DQDL table"


def _snapshot_file(root, account, region, snapshots):
    """A raw file as rds-snapshot-inventory's Lambda writes it (RDS's API names, a list of
    snapshots in lambda_output.body, each with the instances it came from), in the
    Hive-style partition the crawler catalogued."""
    folder = (root / "par_year=2024" / "par_month=05" / "par_day=01" / "par_sf_exc_id=run1" /
              f"par_account_id={account}" / f"par_region={region}")
    folder.mkdir(parents=True)
    record = {"aws_account": account, "account_name": f"acct-{account}", "region": region,
              "ops": "rds_ins", "lambda_output": {"statusCode": 200, "body": snapshots}}
    (folder / "snapshot.json").write_text(json.dumps(record))


def _snapshot(name, instances):
    return {"DBSnapshotIdentifier": name, "DBInstanceIdentifier": f"db-{name}",
            "SnapshotCreateTime": "2024-05-01T02:00:00+00:00", "Engine": "postgres",
            "AllocatedStorage": 20, "Status": "available", "Port": 5432, "Encrypted": True,
            "TagList": [{"Key": "team", "Value": "data"}], "rds_ins_detail": instances}


def _instance(name):
    return {"DBInstanceIdentifier": f"db-{name}", "DBInstanceClass": "db.t3.micro",
            "Engine": "postgres", "Endpoint": {"Address": f"{name}.rds.local", "Port": 5432,
                                               "HostedZoneId": "Z1"},
            "DBSubnetGroup": {"DBSubnetGroupName": "default", "VpcId": "vpc-1",
                              "Subnets": [{"SubnetIdentifier": "subnet-1"}]},
            "MultiAZ": False, "CertificateDetails": {"CAIdentifier": "rds-ca",
                                                     "ValidTill": "2025-01-01T00:00:00"}}


def _rows_partitions_as_text(spark, path):
    conf = "spark.sql.sources.partitionColumnTypeInference.enabled"
    spark.conf.set(conf, "false")
    try:
        return spark.read.parquet(str(path)).collect()
    finally:
        spark.conf.unset(conf)


def test_a_studio_script_with_gs_flatten_and_gs_explode_runs_three_times(spark, tmp_path):
    """rds-snapshot-inventory's Glue Studio job, as published but for its arguments
    (import gs_flatten, gs_explode with outer=True on backquoted flattened names, an
    ApplyMapping of ~90 backquoted names most of which the data lacks, partitioned
    glueparquet): first files, nothing new, one more file."""
    raw, out, conf = tmp_path / "raw", tmp_path / "out", tmp_path / "conf"
    _snapshot_file(raw, "012345678901", "us-east-1", [_snapshot("s1", [_instance("s1")]),
                                             _snapshot("s2", [])])
    conf.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"),
        "catalog": {"snapshot_insight.rds_ins_raw": {"location": str(raw),
                                                     "format": "json"}}}))
    script = Path(__file__).with_name("glue_scripts") / "rds_snapshot_insight_to_parquet.py"

    def run():
        return CliRunner().invoke(app, [
            "--conf-dir", str(conf), "run", "--script", str(script),
            "--arg", "JOB_NAME=snapshot_insight", "--arg", "glue_database=snapshot_insight",
            "--arg", "source_table_name=rds_ins_raw", "--arg", f"target_s3_path={out}",
            "--arg", "job-bookmark-option=job-bookmark-enable"])

    def written():
        return sorted((r["par_account_id"], r["snapshot.dbsnapshotidentifier"],
                       r["instance.endpoint.address"], r["lambda_output.statuscode"])
                      for r in _rows_partitions_as_text(spark, out))

    result = run()
    assert result.exit_code == 0, result.output
    table = spark.read.parquet(str(out))
    assert {"snapshot.allocatedstorage": "int", "instance.endpoint.port": "int",
            "snapshot.encrypted": "boolean", "par_region": "string"}.items() <= dict(
        table.dtypes).items()
    assert "snapshot.taglist" not in table.columns  # not mapped: left out
    # partition values are text, as the catalog's partition keys are: an account's 0 stays
    assert written() == [("012345678901", "s1", "s1.rds.local", 200),
                         ("012345678901", "s2", None, 200)]
    files = sorted(p.name for p in out.rglob("*.parquet"))

    assert run().exit_code == 0  # nothing new: nothing written
    assert sorted(p.name for p in out.rglob("*.parquet")) == files

    _snapshot_file(raw, "222", "eu-west-1", [_snapshot("s3", [_instance("s3")])])
    result = run()
    assert result.exit_code == 0, result.output
    assert written() == [("012345678901", "s1", "s1.rds.local", 200),
                         ("012345678901", "s2", None, 200), ("222", "s3", "s3.rds.local", 200)]


def test_studio_transforms_as_generated_scripts_call_them(spark, tmp_path):
    """Each gs_* module's method, called as Studio writes the call, on a DynamicFrame
    and on a DataFrame; a gs_ module deltamark lacks is one line naming the ones served."""
    from framework.glue import DynamicFrame
    from framework.glue.environment import glue_environment

    df = spark.createDataFrame([
        ("Ann", "Lee", 1714521600, "2024-05-01 10:20:30", "a-b c", "[1,2,3]", {"k": 1},
         "x", "r1", 5.0),
        ("Bo", None, 1714521600123, None, None, None, {}, "y", "r1", 7.0),
        (None, None, None, None, None, None, None, None, None, None)],
        "first STRING, last STRING, epoch BIGINT, seen STRING, words STRING, "
        "tags STRING, props MAP<STRING,INT>, measure STRING, region STRING, rate DOUBLE")
    with glue_environment(spark):
        import gs_concat  # noqa: F401 - as Studio's scripts import them
        import gs_derived  # noqa: F401

        frame = DynamicFrame.fromDF(df, None, "people")
        kept = frame.gs_null_rows().toDF()
        assert kept.count() == 2
        rows = {r.first: r for r in frame.gs_null_rows()
                .gs_concat(colName="full", colList=["first", "last"], spacer=" ")
                .gs_derived(colName="double_rate", expr="rate * 2")
                .gs_to_timestamp(colName="epoch", colType="autodetect", newColName="at")
                .gs_to_timestamp(colName="seen", colType="iso")
                .gs_format_timestamp(colName="seen", dateFormat="%d/%m/%Y", newColName="day")
                .gs_split(colName="words", pattern="[- ]", newColName="parts")
                .gs_array_to_cols(colName="parts", colList="one,,three", indexes="0,1,2")
                .gs_regex_extract(colName="words", regex="(\\w)-(\\w)", newCols="l,r")
                .gs_parse_json(colName="tags")
                .gs_uuid(colName="id").gs_now(colName="loaded", dateFormat="%Y%m%d")
                .gs_repartition(numPartitionsStr="1").toDF().collect()}
        ann, bo = rows["Ann"], rows["Bo"]
        assert (ann.full, bo.full, ann.double_rate) == ("Ann Lee", "Bo ", 10.0)
        assert str(ann.at) == str(bo.at)[:19] and bo.at.microsecond == 123000
        assert (ann.day, bo.day) == ("01/05/2024", None)
        assert (ann.one, ann.three, "" in rows["Ann"].asDict()) == ("a", "c", False)
        assert (ann.l, ann.r, bo.l) == ("a", "b", None)
        assert ann.tags == [1, 2, 3] and len(ann.id) == 36 and len(ann.loaded) == 8
        exploded = frame.gs_explode(colName="props", newCol="prop").toDF()
        assert [(r.prop_key, r.prop_value) for r in exploded.collect()] == [("k", 1)]
        outer = frame.gs_explode(colName="props", newCol="prop", outer=True).toDF()
        assert outer.count() == 3
        assert df.gs_flatten().columns == df.columns  # a DataFrame has the methods too
        pivoted = frame.gs_null_rows().select_fields(["region", "measure", "rate"]).gs_pivot(
            aggCol="rate", aggFunction="mean", colList=["measure"]).toDF()
        assert sorted(pivoted.where("region = 'r1'").first().asDict().items()) == [
            ("region", "r1"), ("x", 5.0), ("y", 7.0)]
        with pytest.raises(GlueUnsupportedError, match=r"import gs_lookup: not supported.*"
                           r"transforms served are gs_flatten, gs_explode"):
            import gs_lookup  # noqa: F401
    assert "gs_concat" not in sys.modules and not hasattr(df, "gs_concat")


PUSH_DOWN_SCRIPT = """\\
import sys
from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.utils import getResolvedOptions
args = getResolvedOptions(sys.argv, ["JOB_NAME", "predicate", "target"])
glueContext = GlueContext()
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
events = glueContext.create_dynamic_frame.from_catalog(
    database="web", table_name="events", transformation_ctx="events",
    push_down_predicate=args["predicate"],
    additional_options={"catalogPartitionPredicate": "year >= '2024'",
                        "useS3ListImplementation": True, "groupFiles": "inPartition"})
glueContext.write_dynamic_frame.from_options(
    frame=events, connection_type="s3", connection_options={"path": args["target"]},
    format="parquet")
job.commit()
"""


def test_push_down_predicates_keep_partitions_and_leave_the_others_unread(spark, tmp_path):
    """from_catalog's push_down_predicate and catalogPartitionPredicate keep the
    partitions they select; the other partitions' files are neither read nor tracked, so
    a run with another predicate reads them (none is lost). A predicate naming a column
    that is no partition key fails in one line."""
    events, target, conf = tmp_path / "events", tmp_path / "out", tmp_path / "conf"
    for year, month in [("2023", "12"), ("2024", "01"), ("2024", "02")]:
        folder = events / f"year={year}" / f"month={month}"
        folder.mkdir(parents=True)
        (folder / "part.json").write_text(json.dumps({"page": f"/{year}/{month}"}) + "\n")
    conf.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"),
        "catalog": {"web.events": {"location": str(events), "format": "json"}}}))
    script = tmp_path / "push_down.py"
    script.write_text(PUSH_DOWN_SCRIPT)

    def run(predicate):
        return CliRunner().invoke(app, [
            "--conf-dir", str(conf), "run", "--script", str(script), "--arg", "JOB_NAME=web",
            "--arg", f"predicate={predicate}", "--arg", f"target={target}",
            "--arg", "job-bookmark-option=job-bookmark-enable"])

    def pages():
        return sorted(r.page for r in spark.read.parquet(str(target)).collect())

    result = run("(year == '2024' and month == '02')")
    assert result.exit_code == 0, result.output
    assert pages() == ["/2024/02"]
    assert run("month != '02'").exit_code == 0  # 2023 stays out by the catalog predicate
    assert pages() == ["/2024/01", "/2024/02"]
    assert run("year >= '2000'").exit_code == 0  # nothing new in the partitions kept
    assert pages() == ["/2024/01", "/2024/02"]
    failed = run("page = '/x'")
    assert failed.exit_code == 1
    assert ("the partition predicate \"(year >= '2024') AND (page = '/x')\" does not apply to "
            "the partition keys found (month, year)") in " ".join(failed.output.split())
