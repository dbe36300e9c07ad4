"""deltamark on object storage: a real S3 server (moto's, on 127.0.0.1) for the state root,
the job lease, file sources and Delta targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pyarrow.fs as pafs
import pytest
import yaml
from deltalake import DeltaTable

from framework import storage
from framework.delta import log
from framework.errors import ConcurrentRunError, JobFailedError, WorkflowError
from framework.state.table_io import open_store
from framework.storage.lease import job_lease, lease_holder


def put(uri: str, text: str) -> None:
    fs, path, _ = storage.filesystem(uri)
    with fs.open_output_stream(path) as out:
        out.write(text.encode())


def land(landing: str, batch: int, rows: int = 3) -> None:
    put(f"{landing}/batch-{batch:03}.json",
        "".join(json.dumps({"id": batch * 100 + i}) + "\n" for i in range(rows)))


def land_glue_orders(landing: str, local: Path, batches: int) -> None:
    """``batches`` new files of jobs/glue_orders.py's orders and documents under
    ``landing`` (``orders/``, ``documents/``): made in ``local`` by the example
    generators, then put (new files only)."""
    from jobs import order_documents_landing, orders_landing

    for kind, written in (
            ("orders", orders_landing.land(local / "orders", batches=batches, orders=20)),
            ("documents", order_documents_landing.land(local / "documents", batches=batches,
                                                       orders=10))):
        for path in written:
            put(f"{landing}/{kind}/{path.name}", path.read_text())


def state_on_s3(ws, bucket: str, delta: str = "auto") -> str:
    """Point the workspace's conf at a state root in ``bucket`` (and a Delta path)."""
    from framework import load_settings

    state = f"{bucket}/state"
    (ws.conf / "deltamark.yaml").write_text(yaml.safe_dump(
        {"state_root": state, "delta": delta}))
    ws.settings = load_settings(conf_dir=ws.conf)
    return state


@pytest.mark.compat
@pytest.mark.parametrize("delta", ["native", "embedded"])
def test_an_incremental_job_keeps_its_files_state_and_target_on_s3(ws, bucket, delta):
    state = state_on_s3(ws, bucket, delta)
    landing, target = f"{bucket}/landing", f"{bucket}/lake/t"
    ws.declare(landing=landing, target=target)
    land(landing, 1)
    land(landing, 2)
    first = ws.run()
    land(landing, 3)
    second = ws.run()
    version = log.table_version(target)
    third = ws.run()  # nothing new: planned on S3 before Spark starts, and skipped

    assert [r.status for r in (first, second, third)] == ["succeeded"] * 2 + ["skipped"]
    assert log.table_version(target) == version
    table = DeltaTable(target, storage_options=storage.delta_options(target))
    ids = sorted(table.to_pyarrow_dataset().to_table(columns=["id"])["id"].to_pylist())
    assert ids == [100, 101, 102, 200, 201, 202, 300, 301, 302]  # each file once
    store = open_store(state)
    assert [r.run_seq for r in store.runs("copy")] == [1, 2, 3]
    assert {f.path.rsplit("/", 1)[-1] for f in store.processed_files("copy", "src")} == {
        "batch-001.json", "batch-002.json", "batch-003.json"}
    fs, root, _ = storage.filesystem(bucket)
    local_leftovers = [p for p in os.listdir(ws.root) if p.startswith("s3")]
    assert not local_leftovers  # no 's3:' directory made on the local disk
    assert fs.get_file_info(f"{root}/state/runs/_delta_log").type == pafs.FileType.Directory


def test_a_landing_prefix_with_nothing_under_it_yet_is_a_run_with_nothing_new(ws, bucket):
    """On S3 a prefix exists once an object is under it: a new job's landing zone before
    its first file reads as nothing new, as an empty directory does on a disk; a bucket
    that does not exist stays an error that names it."""
    landing = f"{bucket}/landing/j1"
    ws.declare(landing=f"{landing}/")
    empty = ws.run()
    assert empty.status == "succeeded" and empty.inputs["src"]["files"] == 0, empty
    land(landing, 1)
    assert ws.run().inputs["src"]["files"] == 1
    assert ws.ids() == [100, 101, 102]
    ws.declare(landing="s3://deltamark-no-such-bucket/landing/")
    missing = "cannot list files: s3://deltamark-no-such-bucket/landing/ does not exist"
    with pytest.raises(JobFailedError, match=missing):
        ws.run()


def test_new_objects_are_read_without_a_request_each_before_the_read(bucket, spark):
    """Given explicit paths, Spark checks each object before reading it (requests to S3);
    deltamark hands Spark the sizes and times it listed, so planning the read of 40 new
    objects asks S3 nothing, and names Spark would take for globs are read as named."""
    from framework.sources.files import FileSource, list_files, plan_files, read_files

    landing = f"{bucket}/landing"
    names = [f"batch-{i:03}.json" for i in range(36)] + [
        "x[1].json", "{a,b}.json", "star*.json", "é 100% #?.json"]
    for i, name in enumerate(names):
        put(f"{landing}/{name}", json.dumps({"id": i, "name": name}) + "\n")
    source = FileSource(paths=(landing,), format="json", schema="id long, name string",
                        lineage_column="source_file")
    plan = plan_files(list_files(source), source, start=None, advance=False)
    jvm = spark._jvm
    s3a = jvm.org.apache.hadoop.fs.Path(landing).getFileSystem(
        spark._jsc.hadoopConfiguration()).getIOStatistics().counters()

    def requests() -> int:
        return s3a.get("object_metadata_request") + s3a.get("object_list_request")

    before = requests()
    df = read_files(spark, source, plan).df
    assert requests() == before
    spark.read.json([f.path for f in plan.files[:3]])
    assert requests() >= before + 3  # the counter sees Spark's checks of explicit paths
    rows = df.collect()
    assert sorted(r.name for r in rows) == sorted(names)
    assert all(r.source_file.startswith(f"{landing}/") for r in rows)
    assert all(r.source_file.rsplit("/", 1)[-1] == quote(r.name)
               for r in rows if r.name.startswith("batch"))


def test_the_lease_on_s3_lets_exactly_one_of_two_processes_run(bucket, tmp_path):
    state, refused = f"{bucket}/state", tmp_path / "refused"
    holder = textwrap.dedent(f"""
        import pathlib, sys, time
        from framework.errors import ConcurrentRunError
        from framework.storage.lease import job_lease
        refused = pathlib.Path({str(refused)!r})
        try:
            with job_lease({state!r}, "copy", sys.argv[1]):
                print("HELD", flush=True)
                deadline = time.monotonic() + 60
                while not refused.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)  # held until the other process was refused
        except ConcurrentRunError as exc:
            print("REFUSED", exc, flush=True)
            refused.touch()
    """)
    started = [subprocess.Popen([sys.executable, "-c", holder, f"run-{i}"],
                                stdout=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in started]
    assert sorted(o.split()[0] for o in outputs) == ["HELD", "REFUSED"], outputs
    [refusal] = [o for o in outputs if o.startswith("REFUSED")]
    assert "one run of a job at a time" in refusal and "\n" not in refusal.strip()
    assert lease_holder(state, "copy") is None  # released at the end of the block
    assert not (tmp_path / "s3:").exists()


def test_a_lease_on_s3_whose_process_died_here_is_taken_over_at_once(bucket):
    state = f"{bucket}/state"
    dead = textwrap.dedent(f"""
        import os
        from framework.storage.lease import job_lease
        with job_lease({state!r}, "copy", "killed-here"):
            print("HELD", flush=True)
            os._exit(9)
    """)
    done = subprocess.run([sys.executable, "-c", dead], capture_output=True, text=True,
                          timeout=120)
    assert "HELD" in done.stdout, done.stderr[-2000:]
    assert lease_holder(state, "copy") is None  # its process is gone, on this machine
    with job_lease(state, "copy", "next-run"):
        assert lease_holder(state, "copy")["run_id"] == "next-run"
        with pytest.raises(ConcurrentRunError), job_lease(state, "copy", "third"):
            pass  # a live holder here is still respected


def test_a_dead_runs_lease_on_s3_expires_and_an_abort_takes_it_over(bucket):
    state = f"{bucket}/state"

    def die_holding(run_id: str) -> None:
        dead = textwrap.dedent(f"""
            import os
            from framework.storage import lease
            lease.LEASE_SECONDS = 3
            lease._machine = lambda: "another machine"  # so its death is not seen here
            with lease.job_lease({state!r}, "copy", {run_id!r}):
                print("HELD", flush=True)
                os._exit(9)  # killed: no release
        """)
        done = subprocess.run([sys.executable, "-c", dead], capture_output=True, text=True,
                              timeout=120)
        assert "HELD" in done.stdout, done.stderr[-2000:]
        assert lease_holder(state, "copy")["run_id"] == run_id

    die_holding("dead-run")
    with pytest.raises(ConcurrentRunError) as error, job_lease(state, "copy", "next-run"):
        pass
    assert error.value.holder["run_id"] == "dead-run"
    with job_lease(state, "copy", "abort dead-run", take_over_from="dead-run"):
        assert lease_holder(state, "copy")["run_id"] == "abort dead-run"
    assert lease_holder(state, "copy") is None

    die_holding("killed-run")
    time.sleep(3.5)  # its lease expires: nobody heartbeats it
    assert lease_holder(state, "copy") is None
    with job_lease(state, "copy", "next-run"):
        assert lease_holder(state, "copy")["run_id"] == "next-run"


def test_commits_and_tidies_on_s3_at_once_never_lose_or_double_a_row(bucket):
    """Four processes append to one state table at once, tidying it every 5 versions:
    put-if-absent makes a colliding commit retry at the next version, so every append lands
    exactly once, and the upkeep lease (an object) lets one process at a time compact, so
    no compaction adds a second copy of rows another already moved."""
    table = f"{bucket}/state/contended"
    writer = textwrap.dedent(f"""
        import sys
        import pyarrow as pa
        from framework.delta import log
        upkeep = log.Upkeep(retention_hours=1, compact_every=5)
        for i in range(15):
            log.append_rows({table!r}, pa.table({{"writer": [sys.argv[1]], "i": [i]}}),
                            upkeep=upkeep)
    """)
    names = ("a", "b", "c", "d")
    writers = [subprocess.Popen([sys.executable, "-c", writer, name], stderr=subprocess.PIPE,
                                text=True) for name in names]
    for process in writers:
        assert process.wait(timeout=180) == 0, process.stderr.read()[-2000:]
    from framework.delta import log

    rows = log.read_rows(table)
    assert sorted(zip(rows["writer"].to_pylist(), rows["i"].to_pylist(), strict=True)) == [
        (w, i) for w in names for i in range(15)]
    operations = [c.operation for c in log.history(table)]
    assert operations.count("WRITE") + operations.count("CREATE TABLE") == 60
    assert operations.count("OPTIMIZE") >= 2


def test_a_bucket_on_another_endpoint_is_reached_through_conf_buckets(ws, s3_server):
    """A second S3 server that only conf's ``buckets:`` section names: ``deltamark run``
    (Spark's S3A, pyarrow, delta-rs and the lease's obstore) keeps the job's files, target
    and state in a bucket there, while the environment names the first server."""
    from framework import load_settings
    from tests.databases import unavailable
    from tests.s3 import S3Server

    if isinstance(s3_server, str):
        unavailable(s3_server)
    other = S3Server()
    try:
        bucket = other.bucket()
        (ws.conf / "deltamark.yaml").write_text(yaml.safe_dump({
            "state_root": f"{bucket}/state",
            "buckets": {bucket.removeprefix("s3://"): {"endpoint_url": other.endpoint}}}))
        ws.settings = load_settings(conf_dir=ws.conf)  # this process's clients too
        landing, target = f"{bucket}/landing", f"{bucket}/lake/t"
        ws.declare(landing=landing, target=target)
        land(landing, 1)
        run = ws.start_run()
        _out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err[-2000:]
        table = DeltaTable(target, storage_options=storage.delta_options(target))
        assert sorted(table.to_pyarrow_dataset().to_table()["id"].to_pylist()) == [
            100, 101, 102]
        assert [r.status for r in open_store(f"{bucket}/state").runs("copy")] == ["succeeded"]
        assert s3_server.endpoint not in storage.delta_options(target).values()
    finally:
        other.stop()
        storage.configure({})

def test_an_object_older_than_the_last_listing_is_read_once(ws, s3_server, tmp_path):
    """An object whose Last-Modified is older than the previous run's listing (a multipart
    upload begun before it, a writer's clock behind) is read, on S3Proxy, where an
    object's Last-Modified is its file's modification time."""
    from framework import load_settings
    from tests.databases import unavailable
    from tests.s3 import S3ProxyServer

    if isinstance(s3_server, str):
        unavailable(s3_server)
    try:
        other = S3ProxyServer(str(tmp_path / "objects"))
    except OSError as exc:
        unavailable(str(exc))
    try:
        bucket = other.bucket()
        (ws.conf / "deltamark.yaml").write_text(yaml.safe_dump({
            "state_root": str(ws.root / "state"),
            "buckets": {bucket.removeprefix("s3://"): {"endpoint_url": other.endpoint}}}))
        ws.settings = load_settings(conf_dir=ws.conf)
        landing = f"{bucket}/landing"
        ws.declare(landing=landing)
        land(landing, 1)
        _, err = (run := ws.start_run()).communicate(timeout=180)
        assert run.returncode == 0, err[-2000:]
        land(landing, 2)
        two_days_ago = time.time() - 2 * 86400
        os.utime(tmp_path / "objects" / bucket.removeprefix("s3://") / "landing"
                 / "batch-002.json", (two_days_ago, two_days_ago))
        fs, path, _ = storage.filesystem(f"{landing}/batch-002.json")
        assert fs.get_file_info(path).mtime.timestamp() < two_days_ago + 1
        _, err = (run := ws.start_run()).communicate(timeout=180)
        assert run.returncode == 0, err[-2000:]
        assert ws.ids() == [100, 101, 102, 200, 201, 202]
        assert [r.inputs["src"]["files"] for r in ws.store.runs("copy")] == [1, 1]
    finally:
        other.stop()
        storage.configure({})


def test_s3_event_notifications_find_new_objects_and_reconciliation_the_lost_ones(
        ws, bucket, s3_server):
    """listing="notifications": the bucket sends its events to an SQS queue (moto's);
    each run reads what they announce, and lets the messages go once it has committed.
    An event lost is made up for by the next full listing."""
    import boto3

    from framework.sources.files import events as file_events

    sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=s3_server.endpoint)
    queue = sqs.create_queue(QueueName=f"landing-{bucket.removeprefix('s3://')}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    boto3.client("s3", region_name="us-east-1", endpoint_url=s3_server.endpoint
                 ).put_bucket_notification_configuration(
        Bucket=bucket.removeprefix("s3://"), NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]})
    landing = f"{bucket}/landing"
    ws.declare(landing=landing, listing="notifications", queue=queue)
    land(landing, 1)
    put(f"{bucket}/elsewhere/x.json", "{}\n")  # announced, not under the source's path
    assert ws.run().inputs["src"]["files"] == 1  # a first run lists in full
    assert file_events.waiting(queue) == 0  # its messages were let go
    land(landing, 2)
    second = ws.run()
    assert second.planned_files["src"] == [f"{landing}/batch-002.json"]
    assert second.inputs["src"]["listed"] == 1  # from the event, not a listing
    assert file_events.waiting(queue) == 0
    land(landing, 3)
    sqs.purge_queue(QueueUrl=queue)  # the event is lost
    assert ws.run().status == "skipped"  # nothing announced
    ws.declare(landing=landing, listing="notifications", queue=queue, reconcile_every_s="0")
    assert ws.run().planned_files["src"] == [f"{landing}/batch-003.json"]
    assert ws.ids() == [100, 101, 102, 200, 201, 202, 300, 301, 302]


def test_credentials_stay_out_of_spark_conf_and_state(ws, bucket, spark, s3_server):
    secret = s3_server.environment["AWS_SECRET_ACCESS_KEY"]
    state = state_on_s3(ws, bucket)
    ws.declare(landing=f"{bucket}/landing", target=f"{bucket}/lake/t")
    land(f"{bucket}/landing", 1)
    assert ws.run().status == "succeeded"
    shown = " ".join(f"{k}={v}" for k, v in spark.sparkContext.getConf().getAll())
    assert "fs.s3a.endpoint" in shown and secret not in shown
    fs, root, _ = storage.filesystem(state)
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as stream:
                assert secret.encode() not in stream.read(), info.path


# Where S3 differs from a local disk: staged files, the target commit, the state commit.
# The crash test on a local disk covers every step on both paths; here every step runs
# with DELTAMARK_FULL_MATRIX=1 (about 2.5 min more).
S3_STEPS = ("staged", "target_committed", "plan_recorded")


def test_a_run_killed_from_outside_as_its_commit_appears_on_s3_lands_every_row_once(
        ws, bucket):
    """The run and its JVM SIGKILLed as its Delta commit's object appears in the bucket
    (in CI; at every instant with DELTAMARK_FULL_MATRIX=1); the next run recovers."""
    from framework.state.table_io import open_store
    from tests.test_exactly_once import (
        FULL_MATRIX,
        INSTANTS,
        assert_recovered,
        kill_when_committing,
        killed_run,
        objects,
    )

    state = state_on_s3(ws, bucket, "native")
    landing, target = f"{bucket}/landing", f"{bucket}/lake/t"
    ws.declare(landing=landing, target=target, lineage="source_file")
    landed: list[int] = []
    for batch, instant in enumerate(INSTANTS if FULL_MATRIX else ["at"], start=1):
        land(landing, batch * 2, rows=2)
        kill_when_committing(ws, ws.start_run("copy", own_group=True), instant,
                             objects(f"{target}/_delta_log", "*.json"),
                             objects(target, "*.parquet"),
                             objects(f"{state}/runs/_delta_log", "*.json"))
        killed = killed_run(open_store(state), instant)
        land(landing, batch * 2 + 1, rows=1)
        landed += [(batch * 2) * 100, (batch * 2) * 100 + 1, (batch * 2 + 1) * 100]
        assert ws.run().status == "succeeded", instant
        assert_recovered(open_store(state), killed, instant)
        assert [i for i, _ in ws.rows(target)] == sorted(landed), instant


@pytest.mark.parametrize("delta", ["native", "embedded"])
def test_a_crash_at_every_step_on_s3_then_recovery(ws, bucket, delta):
    """``deltamark run`` SIGKILLed at steps of the commit protocol with everything on
    S3; the next run recovers, and each landed row is in the target exactly once."""
    from tests.test_exactly_once import FULL_MATRIX, STEPS, crash

    steps = STEPS if FULL_MATRIX else S3_STEPS

    state = state_on_s3(ws, bucket, delta)
    landing, target = f"{bucket}/landing", f"{bucket}/lake/t"
    ws.declare(landing=landing, target=target, lineage="source_file")
    landed = []
    for batch, step in enumerate(steps, start=1):
        land(landing, batch * 2, rows=2)
        crash(ws, "copy", step)
        land(landing, batch * 2 + 1, rows=1)
        landed += [(batch * 2) * 100, (batch * 2) * 100 + 1, (batch * 2 + 1) * 100]
        assert ws.run().status == "succeeded"
        assert [i for i, _ in ws.rows(target)] == sorted(landed), step
    fs, root, _ = storage.filesystem(target)
    staged = fs.get_file_info(pafs.FileSelector(f"{root}/_deltamark_staging",
                                                allow_not_found=True, recursive=True))
    assert not [f.path for f in staged if f.type == pafs.FileType.File]
    recoveries = {r.recovery for r in open_store(state).runs("copy") if r.recovery}
    assert recoveries == {"aborted", "replayed"}  # before and after the target commit


def test_a_delta_source_and_a_parquet_target_on_s3(ws, bucket, spark):
    """An upstream Delta table on S3 read incrementally (its new versions only) into a
    Delta target, and landing files into a plain Parquet target, all on S3."""
    import pyarrow as pa
    from deltalake import write_deltalake

    state_on_s3(ws, bucket)
    upstream = f"{bucket}/upstream"
    options = storage.delta_options(upstream)
    ws.declare("from_delta", cls="DeltaCopy", source=upstream, target=f"{bucket}/lake/copy")
    write_deltalake(upstream, pa.table({"id": pa.array([1, 2], pa.int64())}),
                    storage_options=options)
    assert ws.run("from_delta").status == "succeeded"
    write_deltalake(upstream, pa.table({"id": pa.array([3], pa.int64())}), mode="append",
                    storage_options=options)
    assert ws.run("from_delta").status == "succeeded"
    copied = DeltaTable(f"{bucket}/lake/copy", storage_options=options)
    assert sorted(copied.to_pyarrow_dataset().to_table()["id"].to_pylist()) == [1, 2, 3]

    parquet = f"{bucket}/lake/orders_parquet"
    ws.declare("to_parquet", cls="CopyToParquet", landing=f"{bucket}/landing",
               target=parquet, files="2")
    land(f"{bucket}/landing", 1)
    assert ws.run("to_parquet").status == "succeeded"
    land(f"{bucket}/landing", 2)
    assert ws.run("to_parquet").status == "succeeded"
    assert sorted(r.id for r in spark.read.parquet(parquet).select("id").collect()) == [
        100, 101, 102, 200, 201, 202]


def test_a_change_feed_on_s3_is_read_by_spark_s_tasks_on_the_embedded_path(bucket, spark):
    """The change feed of a partitioned table on S3 (partition values with a space and a
    '+'): its cdc and data files named as Spark names them on S3A, each row once."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from framework.delta import delta_engine

    upstream = f"{bucket}/feed"
    options = storage.delta_options(upstream)
    write_deltalake(upstream, pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                        "p": ["a b+c", "a b+c", "d"]}),
                    partition_by=["p"], configuration={"delta.enableChangeDataFeed": "true"},
                    storage_options=options)
    table = DeltaTable(upstream, storage_options=options)
    table.update(updates={"id": "20"}, predicate="id = 2")
    table.delete("id = 3")
    write_deltalake(upstream, pa.table({"id": pa.array([4], pa.int64()), "p": ["a b+c"]}),
                    mode="append", storage_options=options)
    changes = delta_engine(spark, mode="embedded").read_changes(upstream, after=0, to=3)
    assert sorted((r._change_type, r.id, r.p, r._commit_version) for r in changes.collect()) == [
        ("delete", 3, "d", 2), ("insert", 4, "a b+c", 3),
        ("update_postimage", 20, "a b+c", 1), ("update_preimage", 2, "a b+c", 1)]


def test_a_glue_script_reads_and_writes_s3_paths(bucket, tmp_path, spark):
    """jobs/glue_orders.py with ``connection_options={"paths": ["s3://..."]}`` sources,
    S3 targets (Parquet and Delta) and its state on S3: each file is read once."""
    from typer.testing import CliRunner

    from framework.cli import app
    from tests.test_glue import SCRIPT

    fs, root, _ = storage.filesystem(bucket)

    def land(batches: int) -> None:
        land_glue_orders(f"{bucket}/landing", tmp_path / "landing", batches)

    def run() -> dict:
        result = CliRunner().invoke(app, [
            "--state-root", f"{bucket}/state", "run", "--script", str(SCRIPT), "--json",
            "--arg", "JOB_NAME=glue_orders", "--arg", "job-bookmark-option=job-bookmark-enable",
            "--arg", f"orders_path={bucket}/landing/orders",
            "--arg", f"documents_path={bucket}/landing/documents",
            "--arg", f"target={bucket}/lake"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])["inputs"]

    land(batches=2)
    assert run()["orders_source"]["files"] == 2
    land(batches=1)
    inputs = run()
    assert (inputs["orders_source"]["files"], inputs["documents_source"]["files"]) == (1, 1)
    orders = [r.order_id for r in spark.read.parquet(f"{bucket}/lake/orders").collect()]
    assert len(orders) == len(set(orders)) == 60
    documents = DeltaTable(f"{bucket}/lake/documents",
                           storage_options=storage.delta_options(bucket))
    ids = documents.to_pyarrow_dataset().to_table(columns=["order_id"])["order_id"].to_pylist()
    assert len(ids) == len(set(ids)) == 30
    assert fs.get_file_info(f"{root}/state/bookmarks/_delta_log").type == pafs.FileType.Directory


def test_watermarks_with_the_state_root_on_s3(ws, bucket):
    """A job's column watermark recorded in, and read back from, a state root on S3."""
    import datetime as dt

    state = state_on_s3(ws, bucket)
    landing = f"{bucket}/landing"
    ws.declare(cls="WatermarkedCopy", landing=landing, target=f"{bucket}/lake/t")
    at = dt.datetime(2026, 3, 16, 15, 45)

    def events(name: str, *minutes: int) -> None:
        put(f"{landing}/{name}", "".join(json.dumps(
            {"id": m, "ts": (at + dt.timedelta(minutes=m)).isoformat()}) + "\n" for m in minutes))

    events("a.json", 0, 5)
    ws.run()
    events("b.json", 3, 9)  # 3 is older than the watermark
    ws.run()
    [mark] = open_store(state).watermarks("copy")
    assert (mark.run_seq, mark.rows) == (2, 1)
    assert mark.value.replace(tzinfo=None) == at + dt.timedelta(minutes=9)
    target = DeltaTable(f"{bucket}/lake/t", storage_options=storage.delta_options(bucket))
    assert sorted(target.to_pyarrow_dataset().to_table()["id"].to_pylist()) == [0, 5, 9]


def test_a_workflow_run_s_jobs_read_and_write_s3_on_its_server(ws, bucket):
    """The workflow run's server, and the JVM its jobs share, take the run's AWS
    environment."""
    from framework.workflows import run_workflow, stop_workflow, workflow_runs

    state_on_s3(ws, bucket)
    landing, target = f"{bucket}/landing", f"{bucket}/lake/t"
    ws.declare(name="copy", landing=landing, target=target)
    ws.declare(name="probe", cls="SparkProbe", out=str(ws.root))
    (ws.conf / "workflows").mkdir()
    (ws.conf / "workflows" / "s3_flow.yaml").write_text(yaml.safe_dump({
        "jobs": {"copy": {}, "probe": {}},
        "triggers": [{"start": ["copy"]},
                     {"when": {"all": [{"copy": "SUCCEEDED"}]}, "start": ["probe"]}]}))
    land(landing, 1)
    land(landing, 2)
    report = run_workflow(ws.settings, "s3_flow")
    assert [n.state for n in report.nodes] == ["SUCCEEDED", "SUCCEEDED"], report.nodes
    table = DeltaTable(target, storage_options=storage.delta_options(target))
    assert sorted(table.to_pyarrow_dataset().to_table(columns=["id"])["id"].to_pylist()) == [
        100, 101, 102, 200, 201, 202]
    store = open_store(f"{bucket}/state")
    assert [r.status for job in ("copy", "probe") for r in store.runs(job)] == [
        "succeeded"] * 2

    # a run's slot and its stop request live on S3 too
    ws.declare(name="nap", cls="Step", out=str(ws.root), sleep_s="300")
    (ws.conf / "workflows" / "s3_long.yaml").write_text(yaml.safe_dump({
        "jobs": {"nap": {}}, "triggers": [{"start": ["nap"]}]}))
    reports = []
    running = threading.Thread(target=lambda: reports.append(
        run_workflow(ws.settings, "s3_long")))
    running.start()
    deadline = time.monotonic() + 120
    while not (ws.root / "nap.json").exists():
        assert time.monotonic() < deadline, "the workflow run did not start nap"
        time.sleep(0.2)
    [listed] = workflow_runs(ws.settings, "s3_long")
    assert listed.state == "RUNNING"
    with pytest.raises(WorkflowError, match="1 run\\(s\\) in progress"):
        run_workflow(ws.settings, "s3_long")
    assert stop_workflow(ws.settings, listed.workflow_run_id).state == "STOPPED"
    running.join(timeout=60)
    assert [n.state for n in reports[0].nodes] == ["STOPPED"]
    assert [r.state for r in workflow_runs(ws.settings, "s3_long")] == ["STOPPED"]


def test_targets_on_s3_ahead_of_a_restored_state_are_refused_then_repaired(ws, bucket):
    """A Delta and a Parquet target on S3; the state root restored from a backup."""
    import shutil

    from framework.errors import StateBehindTargetsError
    from framework.ops import actions

    parquet_target, delta_target = f"{bucket}/lake/p", f"{bucket}/lake/d"
    ws.declare(cls="CopyToParquet", target=parquet_target, archive=delta_target)
    ws.land(rows=1)
    ws.run()
    shutil.copytree(ws.root / "state", ws.root / "backup")
    ws.land(rows=1)
    ws.run()
    shutil.rmtree(ws.root / "state")
    shutil.copytree(ws.root / "backup", ws.root / "state")
    ws.land(rows=1)
    with pytest.raises(StateBehindTargetsError, match="holds run 2"):
        ws.run()
    [repaired] = actions.repair(ws.settings, "copy").runs
    assert sorted(repaired.run.outputs) == [delta_target, parquet_target]
    assert ws.run().planned_files["src"] == [str(ws.landing / "batch-003.json")]
    assert sorted(r.id for r in ws.spark.read.parquet(parquet_target).collect()) == [
        100, 200, 300]
    assert sorted(DeltaTable(delta_target, storage_options=storage.delta_options(
        delta_target)).to_pyarrow_table()["id"].to_pylist()) == [100, 200, 300]


def test_the_operations_page_reads_a_state_root_on_s3(ws, bucket):
    """deltamark ui's pages and JSON from a state root on S3, through delta-rs alone."""
    import datetime as dt

    from framework.ui.app import create_app
    from state_tables.model import Bookmark, Run

    state_on_s3(ws, bucket)
    store = open_store(f"{bucket}/state")
    now = dt.datetime.now(dt.UTC)
    store.record_run(Run(job="copy", run_id="r1", run_seq=1, status="succeeded",
                         mode="enable", started_at=now, ended_at=now,
                         inputs={"src": {"files": 2}}),
                     bookmarks=[Bookmark(job="copy", context="src", run_id="r1", run_seq=1,
                               source_kind="custom", state={"high_water": 7})])
    client = create_app(ws.settings).test_client()
    assert client.get("/").status_code == 200
    page = client.get("/jobs/copy")
    assert page.status_code == 200 and "high_water" in page.get_data(as_text=True)
    [run] = client.get("/api/jobs/copy").get_json()["runs"]
    assert (run["run_id"], run["volume"]) == ("r1", 2)


def test_state_tables_on_s3_are_tidied_and_every_run_stays_reachable(bucket):
    """Compaction, checkpoints, VACUUM and log cleanup through delta-rs on S3."""
    import datetime as dt

    from state_tables.model import Bookmark, Run

    root = f"{bucket}/state"
    store = open_store(root)  # within the default retention: every file stays
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for seq in range(1, 26):
        store.record_run(
            Run(job="a", run_id=f"a{seq}", run_seq=seq, status="succeeded", mode="enable",
                started_at=at),
            bookmarks=[Bookmark(job="a", context="src", run_id=f"a{seq}", run_seq=seq,
                      source_kind="files", state={"n": seq})])
    [runs] = [size for size in open_store(root, retention_hours=0).tidy()
              if size.table == "runs"]
    assert runs.before[0] > 50 and runs.after[0] <= 4  # a file, a checkpoint, its commit
    assert [r.run_seq for r in store.runs("a")] == list(range(1, 26))
    assert open_store(root).bookmarks("a", up_to_seq=1)[0].state == {"n": 1}
