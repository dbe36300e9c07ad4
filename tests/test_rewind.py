"""Rewind, reset, target restore, history, the Glue-shaped entry and aborting a run."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.common.faults import CRASH_ENV
from framework.delta import delta_engine
from framework.errors import RewindError, RunStateError
from framework.ops import actions, admin
from framework.state.table_io import open_store


@pytest.fixture
def three_runs(ws):
    """Three committed runs, one batch each; returns their run ids."""
    ws.declare(lineage="source_file")
    ids = []
    for _ in range(3):
        ws.land(rows=2)
        ids.append(ws.run().run_id)
    return ids


def ids_in_target(ws) -> list[int]:
    return [i for i, _ in ws.rows(ws.target)]


def test_rewind_resumes_from_that_run_and_is_recorded(ws, three_runs):
    done = actions.rewind(ws.settings, "copy", to_run=three_runs[0])
    assert [(b.context, b.event, b.restored_from_seq) for b in done.bookmarks] == [
        ("src", "rewind", 1)]
    assert ws.store.bookmarks("copy")[0].state["files_total"] == 1
    ws.land(rows=2)
    report = ws.run()
    assert report.run_seq == 4  # run numbers keep growing
    assert report.planned_files["src"] == [str(ws.landing / f"batch-00{i}.json")
                                           for i in (2, 3, 4)]
    # Without --restore-targets the rows of runs 2 and 3 are in the target twice (as Glue).
    assert ids_in_target(ws).count(200) == 2
    events = [(h["event"], h["run_seq"], h["counts"])
              for h in admin.bookmark_history(ws.store, "copy")]
    assert events == [("commit", 1, True), ("commit", 2, True), ("commit", 3, True),
                      ("rewind", 3, True), ("commit", 4, True)]


@pytest.mark.compat
def test_rewind_with_restore_targets_keeps_the_target_exactly_once(ws, three_runs, delta_path):
    done = actions.rewind(ws.settings, "copy", to_run=three_runs[0], restore_targets=True)
    [restored] = done.restored
    assert (restored.target, restored.to_version) == (ws.target, 0)
    assert ids_in_target(ws) == [100, 101]
    ws.land(rows=2)
    ws.run()
    assert ids_in_target(ws) == [100, 101, 200, 201, 300, 301, 400, 401]


def test_restore_refuses_when_another_writer_committed(ws, three_runs, delta_path):
    engine = delta_engine(ws.spark, mode="embedded")
    foreign = ws.spark.createDataFrame([(999, "by hand")], "id BIGINT, source_file STRING")
    engine.write(foreign, ws.target, merge_schema=True)
    before = engine.version(ws.target)
    with pytest.raises(RewindError) as refused:
        actions.rewind(ws.settings, "copy", to_run=three_runs[0], restore_targets=True)
    assert f"{ws.target} v{before}" in str(refused.value) and "Nothing was changed" in str(
        refused.value)
    assert engine.version(ws.target) == before
    assert ws.store.bookmarks("copy")[0].run_seq == 3  # no rewind recorded


def test_restore_refuses_when_a_target_is_gone(ws, three_runs, tmp_path):
    moved = tmp_path / "moved"
    Path(ws.target).rename(moved)
    with pytest.raises(RewindError) as refused:
        actions.rewind(ws.settings, "copy", to_run=three_runs[0], restore_targets=True)
    assert f"{ws.target} is not a Delta table here" in str(refused.value)
    assert ws.store.bookmarks("copy")[0].run_seq == 3  # no rewind recorded


def test_reset_makes_the_next_run_read_everything(ws, three_runs):
    actions.reset(ws.settings, "copy", context="src")
    assert ws.store.bookmarks("copy") == []
    assert ws.run().inputs["src"]["files"] == 3


def test_every_run_stays_reachable_once_the_state_is_tidied(ws):
    """Rewinds resolve the appended bookmark rows, so the state tables' log entries and old
    files can go (a retention of 0 hours: each tidy deletes them)."""
    ws.declare(lineage="source_file")
    ids = []
    for _ in range(12):
        ws.land(rows=1)
        ids.append(ws.run().run_id)
    result = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "state", "vacuum"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^runs: \d+ files, [\d.]+ MB -> \d+ files", result.output, re.M)
    assert "less than 1 hour(s) (state_retention_hours) stay" in result.output
    open_store(ws.root / "state", retention_hours=0).tidy()
    log_dir = ws.root / "state" / "bookmarks" / "_delta_log"
    assert len(list(log_dir.glob("*.json"))) == 1  # the checkpoint's own commit
    actions.rewind(ws.settings, "copy", to_run=ids[0])
    report = ws.run()
    assert report.planned_files["src"] == [str(ws.landing / f"batch-{i:03}.json")
                                           for i in range(2, 13)]


def test_glue_shaped_bookmark_entry(ws, three_runs):
    entry = admin.glue_bookmark_entry(ws.store, "copy")
    assert (entry["JobName"], entry["Run"], entry["Version"], entry["Attempt"]) == (
        "copy", 3, 3, 1)
    assert (entry["RunId"], entry["PreviousRunId"]) == (three_runs[2], three_runs[1])
    assert json.loads(entry["JobBookmark"])["src"]["files_total"] == 3
    first = admin.glue_bookmark_entry(ws.store, "copy", run_id=three_runs[0])
    assert first["Run"] == 1 and first["PreviousRunId"] is None
    assert json.loads(first["JobBookmark"])["src"]["files_total"] == 1
    with pytest.raises(RunStateError):
        admin.glue_bookmark_entry(ws.store, "copy", run_id="nope")


def test_cli_rewind_history_and_get(ws, three_runs):
    def deltamark(*args):
        return CliRunner().invoke(app, ["--conf-dir", str(ws.conf), *args])

    rewound = deltamark("bookmarks", "rewind", "copy", "--to-run", three_runs[1])
    assert rewound.exit_code == 0, rewound.output
    assert f"copy: rewound to run 2 ({three_runs[1]})" in rewound.stdout
    assert "src: state of run 2" in rewound.stdout and "targets untouched" in rewound.stdout
    history = json.loads(deltamark("bookmarks", "history", "copy", "--json").stdout)
    assert history[-1]["event"] == "rewind" and history[-1]["restored_from_seq"] == 2
    got = json.loads(deltamark("bookmarks", "get", "copy", "--json").stdout)
    assert got["RunId"] == three_runs[2] and got["Version"] == 4
    bad = deltamark("bookmarks", "rewind", "copy", "--to-run", "nope")
    assert bad.exit_code == 1 and "run nope is not a run of this job" in bad.stderr


def test_runs_abort(ws):
    ws.declare(lineage="source_file")
    ws.land(rows=1)
    for point, abortable in (("planned", True), ("target_committed", False)):
        process = ws.start_run("copy", **{CRASH_ENV: point})
        process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL
        interrupted = ws.store.runs("copy")[-1]
        assert interrupted.status == "running"
        if abortable:
            assert actions.abort_run(ws.settings, interrupted.run_id).status == "aborted"
            assert ws.store.runs("copy")[-1].recovery == "aborted_by_operator"
        else:
            with pytest.raises(RunStateError, match="next run completes it"):
                actions.abort_run(ws.settings, interrupted.run_id)
    assert ws.run().recovered.action == "replayed"
    assert ids_in_target(ws) == [100]


def test_rewind_one_context_leaves_the_others(ws):
    landing_b = ws.root / "landing_b"
    landing_b.mkdir()
    ws.declare(cls="TwoSources", landing_b=str(landing_b))
    ids = []
    for n in range(2):
        ws.land(rows=1)
        (landing_b / f"b{n}.json").write_text(json.dumps({"id": 900 + n}) + "\n")
        ids.append(ws.run().run_id)
    actions.rewind(ws.settings, "copy", to_run=ids[0], context="a")
    marks = {b.context: b for b in ws.store.bookmarks("copy")}
    assert (marks["a"].event, marks["a"].state["files_total"]) == ("rewind", 1)
    assert (marks["b"].event, marks["b"].state["files_total"]) == ("commit", 2)
    report = ws.run()
    assert (report.inputs["a"]["files"], report.inputs["b"]["files"]) == (1, 0)


def test_cli_runs_abort_errors_are_one_line(ws, three_runs):
    def deltamark(*args):
        return CliRunner().invoke(app, ["--conf-dir", str(ws.conf), *args])

    unknown = deltamark("runs", "abort", "nope")
    assert unknown.exit_code == 1
    assert unknown.stderr.strip().splitlines() == [
        "error: run nope: not in the runs table. See deltamark runs list."]
    done = deltamark("runs", "abort", three_runs[0])
    assert done.exit_code == 1 and "has already ended (succeeded)" in done.stderr


def test_a_rewind_supersedes_an_interrupted_run(ws, three_runs):
    ws.land(rows=2)
    process = ws.start_run("copy", **{CRASH_ENV: "target_committed"})
    process.communicate(timeout=120)
    actions.rewind(ws.settings, "copy", to_run=three_runs[1], restore_targets=True)
    assert ws.store.runs("copy")[-1].recovery == "rewound"
    report = ws.run()
    assert report.recovered is None
    assert ids_in_target(ws) == [100, 101, 200, 201, 300, 301, 400, 401]
