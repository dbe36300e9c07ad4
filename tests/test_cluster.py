"""Incremental jobs on a standalone Spark cluster (a master and two workers on 127.0.0.1)
with their landing files, target and state on S3: the executors, in JVMs of their own,
read and write the data; the driver (client mode) plans and commits. Both ways of starting
a run (``deltamark run``, ``spark-submit``), each on one Delta path, take turns on one job:
each run's cold driver and executors cost ~10-15 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
import yaml
from deltalake import DeltaTable

from framework import storage
from framework.state.table_io import open_store
from tests.databases import unavailable
from tests.test_s3 import land
from tests.workspace import SUPPORT


@pytest.fixture(scope="module")
def cluster(s3_server):
    from tests.cluster import SparkCluster

    if isinstance(s3_server, str):
        unavailable(s3_server)
    try:
        started = SparkCluster(s3_server.environment)
    except OSError as exc:
        unavailable(str(exc))
    yield started
    started.stop()


def declare(conf, cluster, state: str, landing: str, target: str, delta: str) -> None:
    (conf / "jobs").mkdir(parents=True)
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": state, "delta": delta,
        "spark": {"master": cluster.master,
                  "conf": {"spark.executor.memory": "1g", "spark.executor.cores": "1",
                           # short-lived test executors start sooner compiling with C1 only
                           "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1"}}}))
    (conf / "jobs" / "copy.yaml").write_text(yaml.safe_dump({
        "class": f"{SUPPORT}:CopyFiles", "bookmark": "enable",
        "params": {"landing": landing, "target": target, "lineage": "source_file"}}))


def assert_loaded_once(cluster, state: str, target: str, before: int) -> None:
    table = DeltaTable(target, storage_options=storage.delta_options(target))
    rows = table.to_pyarrow_dataset().to_table(columns=["id", "source_file"]).to_pylist()
    assert sorted(r["id"] for r in rows) == [100, 101, 102, 200, 201, 202, 300, 301, 302]
    assert {r["source_file"].rsplit("/", 1)[-1] for r in rows} == {
        "batch-001.json", "batch-002.json", "batch-003.json"}
    assert [r.status for r in open_store(state).runs("copy")] == ["succeeded"] * 2
    assert applications(cluster) == before + 2  # both runs' executors ran on the cluster


def applications(cluster) -> int:
    return sum(a["name"] == "deltamark copy" for a in cluster.status()["completedapps"])


def test_runs_on_a_standalone_cluster_with_s3_by_deltamark_run_and_by_spark_submit(
        cluster, bucket, tmp_path):
    """A first run by ``deltamark run`` with ``spark.master: spark://...`` (native Delta
    path), then the next by docs/s3-and-clusters.md's spark-submit command line (client
    mode; embedded Delta path) on the same state and target: it reads only the new file."""
    state, landing, target = f"{bucket}/state", f"{bucket}/landing", f"{bucket}/lake/t"
    native, embedded = tmp_path / "native", tmp_path / "embedded"
    declare(native / "conf", cluster, state, landing, target, "native")
    declare(embedded / "conf", cluster, state, landing, target, "embedded")
    before = applications(cluster)

    land(landing, 1)
    land(landing, 2)
    done = subprocess.run([sys.executable, "-m", "framework", "--conf-dir",
                           str(native / "conf"), "run", "copy", "--json"],
                          capture_output=True, text=True, cwd=native, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["status"] == "succeeded"

    land(landing, 3)
    script = embedded / "run_copy.py"
    script.write_text(f"from framework import load_settings, run_job\n"
                      f"print(run_job(load_settings(conf_dir={str(embedded / 'conf')!r}), "
                      f"'copy').status)\n")
    jars = subprocess.run([sys.executable, "-m", "framework.spark.jars", "--class-path"],
                          capture_output=True, text=True, check=True).stdout.strip()
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    done = subprocess.run(
        [str(submit), "--master", cluster.master, "--deploy-mode", "client",
         "--driver-class-path", jars, "--conf", f"spark.executor.extraClassPath={jars}",
         "--conf", f"spark.pyspark.python={sys.executable}", str(script)],
        capture_output=True, text=True, cwd=embedded, timeout=300,
        env={**os.environ, "SPARK_HOME": str(submit.parents[1])})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "succeeded", done.stdout

    assert_loaded_once(cluster, state, target, before)
