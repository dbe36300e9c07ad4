"""Jobs the tests run, configured through their (string) params."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from framework import IncrementalJob, JobContext, storage


def read(ctx: JobContext, **overrides):
    p = ctx.params
    options = {k.removeprefix("option."): v for k, v in p.items() if k.startswith("option.")}
    kwargs = dict(
        format=p.get("format", "json"), transformation_ctx=p.get("ctx", "src"),
        options=options, schema=p.get("schema"),
        exclusions=json.loads(p.get("exclusions", "[]")),
        recurse=p.get("recurse", "true") == "true",
        bounded_files=int(p["bounded_files"]) if "bounded_files" in p else None,
        bounded_size=int(p["bounded_size"]) if "bounded_size" in p else None,
        rewritten=p.get("rewritten", "ignore"),
        max_file_age=(timedelta(seconds=float(p["max_file_age_s"])) if "max_file_age_s" in p
                      else None),
        listing=p.get("listing", "full"),
        reconcile_every=timedelta(seconds=float(p.get("reconcile_every_s", 86400))),
        queue=p.get("queue"),
        lineage_column=p.get("lineage"), bad_records=p.get("bad_records", "fail"),
        bad_records_table=p.get("bad_records_table"),
        schema_evolution=p.get("schema_evolution"), schema_hints=p.get("schema_hints"))
    return ctx.read_files(p["landing"], **{**kwargs, **overrides})


class CopyFiles(IncrementalJob):
    """Landing files -> a Delta table, as they are."""

    def run(self, ctx):
        ctx.write_delta(read(ctx), ctx.params["target"],
                        merge_schema=ctx.params.get("merge_schema") == "true")


class CopyFilesTo(IncrementalJob):
    """Landing files -> a target of kind ``kind``: ``delta``, ``parquet``, or ``jdbc`` (the
    table ``target`` of ``connection``)."""

    def run(self, ctx):
        df, p = read(ctx), ctx.params
        if p["kind"] == "jdbc":
            ctx.write_jdbc(df, p["target"], connection=p["connection"])
        else:
            (ctx.write_parquet if p["kind"] == "parquet" else ctx.write_delta)(df, p["target"])


class FailAfterRead(IncrementalJob):
    def run(self, ctx):
        read(ctx).count()
        raise RuntimeError("transform exploded")


class FailsWhenFlagged(IncrementalJob):
    """CopyFiles, failing while the file named by ``flag`` exists."""

    def run(self, ctx):
        df = read(ctx)
        if Path(ctx.params["flag"]).exists():
            raise RuntimeError("flagged to fail")
        ctx.write_delta(df, ctx.params["target"])


class NoContext(IncrementalJob):
    def run(self, ctx):
        df = ctx.read_files(ctx.params["landing"], format="json",
                            bookmark=ctx.params.get("track") != "false")
        ctx.write_delta(df, ctx.params["target"])


class FileLandsDuringRun(IncrementalJob):
    """Plans its read, then a new file lands before the write."""

    def run(self, ctx):
        df = read(ctx)
        landing = Path(ctx.params["landing"])
        (landing / f"during-run-{ctx.run_seq}.json").write_text(
            json.dumps({"id": 1000 + ctx.run_seq}) + "\n")
        ctx.write_delta(df, ctx.params["target"])


class TwoTargets(IncrementalJob):
    """The same input to two targets, as bronze and an archive copy."""

    def run(self, ctx):
        df = read(ctx, lineage_column="source_file")
        ctx.write_delta(df, ctx.params["target"])
        ctx.write_delta(df, ctx.params["archive"])


class Slow(IncrementalJob):
    """Reads, then takes its time before writing (for concurrency tests)."""

    def run(self, ctx):
        import time

        df = read(ctx)
        Path(ctx.params["started_flag"]).write_text(ctx.run_id)
        time.sleep(float(ctx.params["sleep_s"]))
        ctx.write_delta(df, ctx.params["target"])


class TwoSources(IncrementalJob):
    """Two landing directories, two contexts, one target."""

    def run(self, ctx):
        first = read(ctx, transformation_ctx="a", schema="id BIGINT",
                     lineage_column="source_file")
        second = ctx.read_files(ctx.params["landing_b"], format="json", transformation_ctx="b",
                                schema="id BIGINT", lineage_column="source_file")
        ctx.write_delta(first.unionByName(second), ctx.params["target"])


class DeltaCopy(IncrementalJob):
    """A Delta table read incrementally (``read``: read_delta's options, as JSON), copied;
    optionally the source grows mid-run."""

    def run(self, ctx):
        options = json.loads(ctx.params.get("read", "{}"))
        df = ctx.read_delta(ctx.params["source"], transformation_ctx="src", **options)
        if ctx.params.get("grow_source_during_run") == "true":
            from framework.delta import delta_engine

            extra = ctx.spark.createDataFrame([(10_000 + ctx.run_seq,)], "id BIGINT")
            delta_engine(ctx.spark, mode="embedded").write(extra, ctx.params["source"])
        ctx.write_delta(df, ctx.params["target"])


class NamedCopy(IncrementalJob):
    """Landing files, or the catalog's Delta table ``source_table``, -> the catalog's Delta
    table ``target_table`` (at ``location``, when new)."""

    def run(self, ctx):
        p = ctx.params
        df = (ctx.read_delta(table=p["source_table"], transformation_ctx="src")
              if "source_table" in p else read(ctx))
        ctx.write_delta(df, table=p["target_table"], location=p.get("location"))


class WatermarkOn(IncrementalJob):
    """Watermarks ``column`` of the rows the SQL query ``rows`` gives."""

    def run(self, ctx):
        ctx.watermark(ctx.spark.sql(ctx.params["rows"]), ctx.params["column"],
                      transformation_ctx="w")


class WatermarkedCopy(IncrementalJob):
    """Reads every file (no bookmark), keeps rows newer than the last watermark."""

    def run(self, ctx):
        from pyspark.sql import functions as F

        df = ctx.read_files(ctx.params["landing"], format="json", bookmark=False,
                            schema="id BIGINT, ts TIMESTAMP")
        last = ctx.last_watermark("events")
        if last is not None:
            df = df.where(F.col("ts") > F.lit(last))
        ctx.watermark(df, "ts", transformation_ctx="events")
        if ctx.params.get("fail") == "true":
            raise RuntimeError("after the watermark")
        ctx.write_delta(df, ctx.params["target"])


def read_db(ctx: JobContext):
    p = ctx.params
    lookback = None
    if "lookback_s" in p:
        lookback = timedelta(seconds=float(p["lookback_s"]))
    elif "lookback" in p:
        lookback = int(p["lookback"])
    return ctx.read_jdbc(
        p.get("table"), connection=p["connection"], query=p.get("query"),
        transformation_ctx=p.get("ctx", "db"), keys=[k for k in p.get("keys", "").split(",") if k],
        sort_order=p.get("order", "asc"), lookback=lookback,
        partition_column=p.get("partition_column"),
        num_partitions=int(p["num_partitions"]) if "num_partitions" in p else None,
        initial_value=p.get("initial_value"), end_value=p.get("end_value"),
        bounded_rows=int(p["bounded_rows"]) if "bounded_rows" in p else None)


class TableCopy(IncrementalJob):
    """A database table -> Delta, appended, or merged on ``merge_on``. With
    ``insert_during_run``, that SQL runs after the read is planned, before the write."""

    def run(self, ctx):
        p = ctx.params
        df = read_db(ctx)
        if "insert_during_run" in p:
            from databases import execute

            execute(p["db_kind"], p["db_dsn"], p["insert_during_run"])
        merge_on = [k for k in p.get("merge_on", "").split(",") if k]
        ctx.write_delta(df, p["target"], mode="merge" if merge_on else "append",
                        merge_on=merge_on)


class TableAndFiles(IncrementalJob):
    """A database table (``read_db``) and landing files (``read``), merged on ``id``."""

    def run(self, ctx):
        df = read_db(ctx).select("id").unionByName(read(ctx).select("id"))
        ctx.write_delta(df, ctx.params["target"], mode="merge", merge_on=["id"])


class TableToTwoTargets(IncrementalJob):
    """One database read written to two Delta tables (for crash-recovery tests)."""

    def run(self, ctx):
        df = read_db(ctx)
        ctx.write_delta(df, ctx.params["target"])
        ctx.write_delta(df, ctx.params["archive"])


class CheckedCopy(IncrementalJob):
    """Landing order files -> a Delta table (``sink: parquet``: a Parquet directory) through
    the rule set named by ``ruleset``; ``archive`` (Delta), ``raw`` (Parquet) and
    ``iceberg_archive`` are written first, ungated."""

    def run(self, ctx):
        df = read(ctx, schema="order_id BIGINT, email STRING, amount DOUBLE, status STRING")
        if "archive" in ctx.params:
            ctx.write_delta(df, ctx.params["archive"])
        if "raw" in ctx.params:
            ctx.write_parquet(df, ctx.params["raw"])
        if "iceberg_archive" in ctx.params:
            ctx.write_iceberg(df, ctx.params["iceberg_archive"])
        write = ctx.write_parquet if ctx.params.get("sink") == "parquet" else ctx.write_delta
        write(df, ctx.params["target"], checks=ctx.params["ruleset"])


class Step(IncrementalJob):
    """A workflow step without data: records the params it got (``<out>/<job>.json``, with
    its run properties under ``_run_properties`` and its workflow under ``_workflow``),
    publishes ``<job>_done``, and fails (``fail=true``), sleeps (``sleep_s``) or is killed
    (``kill=true``: SIGKILL, as an operator or the OOM killer would) when told."""

    def run(self, ctx):
        import os
        import signal
        import time

        p = ctx.params
        if p.get("kill") == "true":
            os.kill(os.getpid(), signal.SIGKILL)
        seen = {**p, "_run_properties": dict(ctx.run_properties),
                "_workflow": [ctx.workflow_name, ctx.workflow_run_id]}
        Path(p["out"], f"{ctx.job_name}.json").write_text(json.dumps(seen, sort_keys=True))
        time.sleep(float(p.get("sleep_s", 0)))
        if p.get("fail") == "true":
            raise RuntimeError(f"{ctx.job_name} was told to fail")
        ctx.publish(f"{ctx.job_name}_done", ctx.run_seq)


class CopyToParquet(IncrementalJob):
    """Landing files -> a Parquet directory (in ``files`` files; ``archive``: a Delta
    table written first)."""

    def run(self, ctx):
        from pyspark.sql import functions as F

        p = ctx.params
        df = read(ctx)
        if df.columns:  # an empty read has none
            df = df.withColumn("part", F.col("id") % 2).repartition(int(p.get("files", 1)))
        if "archive" in p:
            ctx.write_delta(df, p["archive"])
        ctx.write_parquet(df, p["target"], partition_by=["part"])


def label(order_id):
    """What the job's UDF computes on the executors, with deltamark's code."""
    return storage.join("orders", str(order_id))


def refuse(order_id):
    raise ValueError(f"order {order_id} has no customer")


class UdfRaises(IncrementalJob):
    """Landing files through a Python UDF that raises on the executors, collected first
    (``collect``) or written."""

    def run(self, ctx):
        from pyspark.sql import functions as F

        df = read(ctx).withColumn("checked", F.udf(refuse, "int")("id"))
        if ctx.params.get("collect"):
            df.collect()
        ctx.write_delta(df, ctx.params["target"])


class LabelledCopy(IncrementalJob):
    """Landing files -> a Delta table, with a column a Python UDF computes on executors."""

    def run(self, ctx):
        from pyspark.sql import functions as F

        labelled = F.udf(label)
        ctx.write_delta(read(ctx).withColumn("label", labelled("id")),
                        ctx.params["target"])


class SparkProbe(IncrementalJob):
    """A workflow step on Spark: records which JVM ran it, what it saw of the others'
    sessions and how many objects py4j holds in that JVM (``<out>/<job>.json``), then
    leaves a SQL conf, a temporary view and some DataFrames behind.
    ``kill_jvm=true``: SIGKILL its JVM first, as the OOM killer would; ``stop=true``:
    ``spark.stop()`` at the end; ``busy_s``: a Spark job of that long first;
    ``wait_idle=true``: first wait (up to 20 s) until no Spark job runs in the JVM."""

    def run(self, ctx):
        import os
        import signal
        import time

        spark, p = ctx.spark, ctx.params
        jvm = spark.sparkContext._jvm
        if p.get("kill_jvm") == "true":
            os.kill(jvm.java.lang.ProcessHandle.current().pid(), signal.SIGKILL)
        if "busy_s" in p:
            seconds = float(p["busy_s"])
            spark.range(2, numPartitions=2).rdd.map(lambda _: time.sleep(seconds)).count()
        waited = time.monotonic()
        while (p.get("wait_idle") == "true" and time.monotonic() - waited < 20
               and spark.sparkContext.statusTracker().getActiveJobsIds()):
            time.sleep(0.2)
        from py4j.java_gateway import JavaObject

        gateway = JavaObject("GATEWAY_SERVER", spark.sparkContext._gateway._gateway_client)
        seen = {"jvm": jvm.java.lang.ProcessHandle.current().pid(),
                "jvm_objects": gateway.getGateway().getBindings().size(),
                "app": spark.sparkContext.applicationId,
                "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                "views": sorted(t.name for t in spark.catalog.listTables() if t.isTemporary),
                "active_jobs": list(spark.sparkContext.statusTracker().getActiveJobsIds()),
                "waited_s": time.monotonic() - waited}
        Path(p["out"], f"{ctx.job_name}.json").write_text(json.dumps(seen))
        frames = [spark.range(i).selectExpr("id", "id * 2 AS twice") for i in range(20)]
        spark.conf.set("spark.sql.shuffle.partitions", "3")
        spark.range(1).createOrReplaceTempView(f"left_by_{ctx.job_name}")
        if p.get("stop") == "true":
            spark.stop()
        return frames


class ExitsEarly(IncrementalJob):
    """CopyFiles that ends with ``sys.exit(code)`` after its write (as Glue scripts do)."""

    def run(self, ctx):
        import sys

        ctx.write_delta(read(ctx), ctx.params["target"])
        sys.exit(int(ctx.params["code"]))


class FilesToIceberg(IncrementalJob):
    """Landing files -> an Iceberg table (``table``), in ``mode`` (merge on ``id``)."""

    def run(self, ctx):
        mode = ctx.params.get("mode", "append")
        ctx.write_iceberg(read(ctx), ctx.params["table"], mode=mode,
                          keys=["id"] if mode == "merge" else (),
                          merge_schema=ctx.params.get("merge_schema") == "true",
                          checks=ctx.params.get("checks_name"))


class IcebergToIceberg(IncrementalJob):
    """An Iceberg table read incrementally (``changes``: its changelog, updates paired on
    ``id``; ``read``: read_iceberg's other options, as JSON) -> another, merged on ``id``
    (deletes left out)."""

    def run(self, ctx):
        changes = ctx.params.get("changes") == "true"
        df = ctx.read_iceberg(ctx.params["source"], transformation_ctx="src", changes=changes,
                              keys=["id"] if changes else (),
                              expired=ctx.params.get("expired", "fail"),
                              **json.loads(ctx.params.get("read", "{}")))
        if changes:
            from pyspark.sql import functions as F

            ctx.publish("changes", ",".join(sorted(
                f"{r._change_type}:{r.id}" for r in df.select("_change_type", "id").collect())))
            df = df.where(F.col("_change_type").isin("INSERT", "UPDATE_AFTER")).drop(
                "_change_type", "_change_ordinal", "_commit_snapshot_id")
        ctx.write_iceberg(df, ctx.params["target"], mode=ctx.params.get("mode", "merge"),
                          keys=["id"])


class FilesToIcebergBySpark(IncrementalJob):
    """Landing files -> an Iceberg table written by the job itself with Spark's v2 writer
    (not tracked by deltamark as a target)."""

    def run(self, ctx):
        df = read(ctx, rescued_data_column=False)  # the table's one column, by position
        ctx.spark.sql(f"CREATE TABLE IF NOT EXISTS {ctx.params['table']} (id BIGINT) "
                      "USING iceberg")
        df.writeTo(ctx.params["table"]).append()


class SlowCopy(IncrementalJob):
    """CopyFiles whose rows take ``slow_ms`` each to pass through Spark (a JVM sleep, no
    Python worker, in a column ``slept``); with DELTAMARK_TEST_KILL_AFTER=N in its
    environment, the process kills itself (SIGKILL) N seconds after it starts the write."""

    def run(self, ctx):
        import os
        import signal
        import threading

        from pyspark.sql import functions as F

        pause = int(ctx.params["slow_ms"])
        sleep = f"reflect('java.lang.Thread', 'sleep', cast({pause} as bigint))"
        df = read(ctx).withColumn("slept", F.expr(sleep))  # a column: never optimized away
        if kill_after := os.environ.get("DELTAMARK_TEST_KILL_AFTER"):
            threading.Timer(float(kill_after),
                            lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        ctx.write_delta(df, ctx.params["target"])


class TableToTable(IncrementalJob):
    """A database table -> another table of the same database (``to``), appended."""

    def run(self, ctx):
        ctx.write_jdbc(read_db(ctx), ctx.params["to"], connection=ctx.params["connection"])
