"""A state root behind its targets (restored from a backup, or missing its newest commits)
is refused before anything is written, and ``state repair`` rebuilds what it lost."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import log
from framework.errors import JobFailedError, RepairError, StateBehindTargetsError
from framework.ops import actions


def back_up(ws):
    backup = ws.root / "backup"
    shutil.rmtree(backup, ignore_errors=True)
    shutil.copytree(ws.root / "state", backup)
    return backup


def restore(ws, backup):
    shutil.rmtree(ws.root / "state")
    shutil.copytree(backup, ws.root / "state")


def parquet_ids(ws) -> list[int]:
    return sorted(r.id for r in ws.spark.read.parquet(ws.target).select("id").collect())


def test_a_state_restored_from_a_backup_is_refused_then_repaired(ws, delta_path):
    ws.declare(lineage="source_file")
    refused_then_repaired(ws, ws.ids)


def test_a_parquet_target_ahead_of_its_state_is_refused_then_repaired(ws):
    ws.declare(cls="CopyToParquet")
    refused_then_repaired(ws, lambda: parquet_ids(ws))


def refused_then_repaired(ws, sink):
    ws.land(rows=2)
    ws.run()
    backup = back_up(ws)
    ws.land(rows=2)
    lost = ws.run()
    restore(ws, backup)  # the state no longer knows run 2
    ws.land(rows=2)
    with pytest.raises(StateBehindTargetsError) as refused:
        ws.run()
    assert f"holds run 2 ({lost.run_id})" in str(refused.value)
    assert "deltamark state repair copy" in str(refused.value)
    assert sink() == [100, 101, 200, 201]  # nothing written, nothing lost
    assert ws.store.last_run("copy").run_seq == 1

    done = actions.repair(ws.settings, "copy")
    [repaired] = done.runs
    assert (repaired.run.run_id, repaired.run.run_seq, repaired.run.recovery) == (
        lost.run_id, 2, "repaired")
    assert ws.store.bookmarks("copy")[0].state["files_total"] == 2
    report = ws.run()
    assert report.planned_files["src"] == [str(ws.landing / "batch-003.json")]
    assert sink() == [100, 101, 200, 201, 300, 301]
    assert actions.repair(ws.settings, "copy").runs == ()


def test_a_state_that_lost_every_run_is_rebuilt_from_a_named_target(ws, delta_path):
    """Files still in the settling window of an earlier run stay read: the newest run's
    record carries them."""
    ws.declare(lineage="source_file")
    ws.land(rows=1)
    ws.run()
    ws.land(rows=1)
    second = ws.run()
    shutil.rmtree(ws.root / "state")
    ws.land(rows=1)
    # The state knows no target: the write itself is refused (run 1 here is not run 1 there).
    with pytest.raises(JobFailedError) as refused:
        ws.run()
    assert isinstance(refused.value.cause, StateBehindTargetsError)
    assert f"holds run 2 ({second.run_id})" in str(refused.value)
    assert ws.ids() == [100, 200]
    shutil.rmtree(ws.root / "state")

    result = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "state", "repair", "copy",
                                      "--target", ws.target])
    assert result.exit_code == 0, result.output
    assert "recorded run 1" in result.output and "recorded run 2" in result.output
    report = ws.run()
    assert report.planned_files["src"] == [str(ws.landing / "batch-003.json")]
    assert ws.ids() == [100, 200, 300]


def test_repair_refuses_a_run_it_cannot_rebuild(ws, delta_path):
    """A commit without deltamark's record (made by an older version) is not guessed at."""
    ws.declare(lineage="source_file")
    ws.land(rows=1)
    ws.run()
    backup = back_up(ws)
    ws.land(rows=1)
    ws.run()
    restore(ws, backup)
    newest = log.history(ws.target, limit=1)[0]
    record = newest.user_metadata["deltamark"]
    record["bookmarks"] = {c: e["state"] for c, e in record["bookmarks"].items()}
    _rewrite_user_metadata(ws.target, newest.version, record)
    with pytest.raises(RepairError) as refused:
        actions.repair(ws.settings, "copy")
    assert "cannot be rebuilt" in str(refused.value) and "--restore-targets" in str(
        refused.value)
    assert ws.store.last_run("copy").run_seq == 1


def _rewrite_user_metadata(table: str, version: int, record: dict) -> None:
    """Make commit ``version`` look as an older deltamark wrote it."""
    import json
    from pathlib import Path

    commit = Path(table) / "_delta_log" / f"{version:020}.json"
    lines = []
    for line in commit.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            action["commitInfo"]["userMetadata"] = json.dumps({"deltamark": record})
        lines.append(json.dumps(action))
    commit.write_text("\n".join(lines) + "\n")
