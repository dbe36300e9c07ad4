"""Plain Parquet targets: exactly once through crashes, recovery, aborts and rewinds."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.common.faults import CRASH_ENV
from framework.delta import delta_engine
from framework.ops import actions


@pytest.fixture
def parquet_job(ws):
    ws.target = str(ws.root / "lake" / "orders_parquet")
    ws.declare(cls="CopyToParquet", target=ws.target, files="3")
    return ws


def parquet_ids(ws) -> list[int]:
    """What any Parquet reader sees: every data file of the directory."""
    if not Path(ws.target).exists():
        return []
    return sorted(r.id for r in ws.spark.read.parquet(ws.target).select("id").collect())


def data_files(ws) -> list[Path]:
    return sorted(p for p in Path(ws.target).rglob("*.parquet") if "_deltamark" not in p.parts)


def crash(ws, point):
    process = ws.start_run("copy", **{CRASH_ENV: point})
    process.communicate(timeout=180)
    assert process.returncode == -signal.SIGKILL


def test_runs_append_each_row_once_in_partitioned_files_with_a_manifest(parquet_job):
    ws = parquet_job
    ws.land(rows=6)
    first = ws.run()
    written = first.outputs[ws.target]
    assert {k: written[k] for k in ("written", "format", "rows", "replayed")} == {
        "written": True, "format": "parquet", "rows": 6, "replayed": False}
    assert written["files"] == len(data_files(ws)) > 2
    ws.land(rows=2)
    shown = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "run", "copy"])
    assert shown.exit_code == 0, shown.output
    assert f"wrote {ws.target}: 2 Parquet files, 2 rows" in shown.output  # part=0 and 1
    assert ws.run(force=True).outputs[ws.target]["written"] is False  # nothing new
    assert parquet_ids(ws) == [100, 101, 102, 103, 104, 105, 200, 201]
    assert {p.parent.name for p in data_files(ws)} == {"part=0", "part=1"}
    assert all(p.name.startswith("dm-") for p in data_files(ws))
    manifests = sorted((Path(ws.target) / "_deltamark" / "commits").glob("*.json"))
    assert [json.loads(m.read_text())["rows"] for m in manifests] == [6, 2]
    assert not list((Path(ws.target) / "_deltamark" / "staging").iterdir())


def test_a_crash_while_moving_files_is_cleaned_up_and_the_batch_read_again(parquet_job):
    ws = parquet_job
    ws.land(rows=6)
    crash(ws, "parquet_moved:2")
    assert len(data_files(ws)) == 2  # a reader sees part of the run until recovery
    report = ws.run()
    assert report.recovered.action == "aborted"
    assert report.inputs["src"]["files"] == 1
    assert parquet_ids(ws) == [100, 101, 102, 103, 104, 105]
    assert len(data_files(ws)) == report.outputs[ws.target]["files"]


def test_a_replay_rewrites_only_the_parquet_target_that_had_not_landed(parquet_job):
    ws = parquet_job
    archive = str(ws.root / "lake" / "archive")
    ws.declare(cls="CopyToParquet", target=ws.target, files="3", archive=archive)
    ws.land(rows=6)
    crash(ws, "parquet_moved:1")
    report = ws.run()
    assert report.recovered.action == "replayed"
    assert parquet_ids(ws) == [100, 101, 102, 103, 104, 105]
    archived = delta_engine(ws.spark, mode="embedded").read(archive)
    assert sorted(r.id for r in archived.collect()) == [100, 101, 102, 103, 104, 105]
    # landed in both: a crash after the job returned replays it, nothing written twice
    ws.land(rows=1)
    crash(ws, "returned")
    replay = ws.run().recovered
    assert replay.action == "replayed"
    assert all(out["replayed"] for out in ws.store.find_run(replay.run_id).outputs.values())
    assert parquet_ids(ws) == [100, 101, 102, 103, 104, 105, 200]


def test_operator_abort_deletes_the_unlanded_files(parquet_job):
    ws = parquet_job
    ws.land(rows=6)
    crash(ws, "parquet_moved:1")
    interrupted = ws.store.runs("copy")[-1]
    assert actions.abort_run(ws.settings, interrupted.run_id).status == "aborted"
    assert data_files(ws) == []
    ws.run()
    assert parquet_ids(ws) == [100, 101, 102, 103, 104, 105]


def test_rewind_with_restore_targets_deletes_only_this_jobs_later_files(parquet_job):
    ws = parquet_job
    ids = []
    for _ in range(3):
        ws.land(rows=2)
        ids.append(ws.run().run_id)
    by_hand = Path(ws.target) / "part=9" / "loaded-by-hand.parquet"
    ws.spark.createDataFrame([(999,)], "id BIGINT").toPandas().to_parquet(by_hand.parent.mkdir()
                                                                          or by_hand)
    done = actions.rewind(ws.settings, "copy", to_run=ids[0], restore_targets=True)
    [pruned] = done.restored
    assert (pruned.target, pruned.removed_runs) == (ws.target, (3, 2))
    assert parquet_ids(ws) == [100, 101, 999]
    ws.land(rows=2)
    ws.run()
    assert parquet_ids(ws) == [100, 101, 200, 201, 300, 301, 400, 401, 999]


def test_a_dry_run_writes_no_parquet(parquet_job):
    ws = parquet_job
    ws.land(rows=2)
    report = ws.run(dry_run=True)
    assert report.outputs[ws.target]["written"] is False
    assert not Path(ws.target).exists()
