"""Exactly-once through crashes, and one run at a time, with real processes.

A run process (``deltamark run``) is SIGKILLed at each step of the commit protocol, at
random moments, and from outside with its JVM at the instant its target's commit appears
on storage (a watcher polls the target: a new Delta log entry, Parquet manifest, database
mark, Iceberg metadata file); the next run recovers. After every scenario each source row
is in each target exactly once, and the bookmark accounts for exactly the files in it.

DELTAMARK_CRASH_SCENARIOS sets how many random crash points run (default 6);
DELTAMARK_CRASH_SEED fixes their seed. DELTAMARK_FULL_MATRIX=1 kills each target kind at
every instant (``INSTANTS``), not only as its commit appears.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.common.faults import CRASH_ENV
from framework.errors import ConcurrentRunError
from framework.storage.lease import lease_holder
from state_tables.model import Run

STEPS = ["started", "planned", "staged", "target_committed", "plan_recorded", "returned"]
# Each Delta path, on each Spark line, crashes where they differ (its staged files, its
# target commit); the runner's own steps are crashed once, on one path. Every step on
# each path with DELTAMARK_FULL_MATRIX=1.
ENGINE_STEPS = ["staged", "target_committed"]
PROTOCOL_STEPS = [step for step in STEPS if step not in ENGINE_STEPS]
FULL_MATRIX = os.environ.get("DELTAMARK_FULL_MATRIX") == "1"
RANDOM_SCENARIOS = int(os.environ.get("DELTAMARK_CRASH_SCENARIOS", "3"))
SEED = int(os.environ.get("DELTAMARK_CRASH_SEED", random.randrange(1_000_000)))


def landed_rows(ws) -> list[tuple[int, str]]:
    found = []
    for path in sorted(ws.landing.glob("*.json")):
        found += [(int(line.split(":")[1].strip(" }")), path.name)
                  for line in path.read_text().splitlines()]
    return sorted(found)


def staged_files(target: str) -> list[str]:
    """What a Delta target (``_deltamark_staging``) or a Parquet one (``_deltamark/staging``)
    holds staged."""
    return [str(p) for pattern in ("_deltamark_staging/*", "_deltamark/staging/*")
            for p in Path(target).glob(pattern)]


def assert_exactly_once(ws, *targets: str, job: str = "copy",
                        rows: Callable[[str], list[tuple[int, str]]] | None = None,
                        staged: Callable[[str], list[str]] | None = staged_files) -> None:
    """Each landed row once in each of ``targets`` (read by ``rows``: a Delta table's by
    default), nothing a killed run staged left there (``staged`` lists it: by default a
    Delta or Parquet target's staging directory; None: the caller looks), and the bookmark
    counting exactly the files landed."""
    expected = landed_rows(ws)
    for target in targets:
        assert (rows or ws.rows)(target) == expected, f"{target}: duplicates or gaps"
        if staged is not None:
            assert not staged(target), f"{target}: staged data left"
    [bookmark] = ws.store.bookmarks(job)
    assert bookmark.state["files_total"] == len({name for _, name in expected})
    history = ws.store.histories(job)["src"]
    counted = {Path(f.path).name for f in ws.store.processed_files(
        job, "src", run_seqs=history.valid_runs)}
    assert counted == {name for _, name in expected}


def staged_tables(db) -> Callable[[str], list[str]]:
    """The staging tables a database target's runs left in ``db``."""
    listed = ("SELECT name FROM sqlite_master" if db.kind == "sqlite" else
              "SELECT tablename FROM pg_tables")
    return lambda _target: [name for (name,) in db.query(listed)
                            if name.startswith("deltamark_stage_")]


def killed_run(store, instant: str, job: str = "copy") -> Run:
    """The run just killed at ``instant`` (``INSTANTS``), as the state holds it: one killed
    before its state commit is left running (not recorded succeeded)."""
    killed = store.last_run(job)
    if instant in ("before", "at"):
        assert killed.status == "running", (instant, killed.status)
    return killed


def assert_recovered(store, killed: Run, instant: str, job: str = "copy") -> None:
    """The run after a kill at ``instant`` settled ``killed``: aborted it where its target
    had not committed, replayed it (recording the commit it made) where it had; one the
    kill found recorded succeeded (it may be, 0.2 s after its target committed) needs
    nothing."""
    [now] = [r for r in store.runs(job) if r.run_id == killed.run_id]
    if killed.status == "succeeded":
        assert now.recovery is None, instant
    elif instant == "before":
        assert (now.status, now.recovery) == ("aborted", "aborted"), instant
    else:
        assert (now.status, now.recovery, now.attempt) == (
            "succeeded", "replayed", killed.attempt + 1), instant


def crash(ws, job: str, point: str) -> None:
    process = ws.start_run(job, **{CRASH_ENV: point})
    _out, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, (point, process.returncode, err[-2000:])


#: when a run is killed from outside: as its target's data files appear (before the
#: commit), as the commit appears, 0.2 s after it, as the state commit after it appears
INSTANTS = ("before", "at", "after", "state")


def kill_at(process, appeared: Callable[[], bool], what: str, *, delay: float = 0.0) -> None:
    """SIGKILL ``process``'s group (the run and its JVM, as a machine dies) the moment
    ``appeared()`` holds, polled every millisecond (``delay`` seconds after); fails if the
    run ended first."""
    wait_for(process, appeared, what)
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGKILL)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, (what, process.returncode, err[-2000:])


def wait_for(process, appeared: Callable[[], bool], what: str) -> None:
    """Until ``appeared()`` holds (polled every millisecond); fails if ``process`` ends
    first."""
    while not appeared():
        if process.poll() is not None:
            _out, err = process.communicate()
            pytest.fail(f"the run ended ({process.returncode}) before {what}:\n{err[-3000:]}")
        time.sleep(0.001)


def appears(count: Callable[[], int]) -> Callable[[], bool]:
    """Whether ``count()`` grew since this call."""
    before = count()
    return lambda: count() > before


def files(directory: str | Path, pattern: str) -> Callable[[], int]:
    """How many files under ``directory`` match ``pattern``."""
    return lambda: len(list(Path(directory).glob(pattern)))


def kill_when_committing(ws, process, instant: str, commits: Callable[[], int],
                         data: Callable[[], int] | None = None,
                         state_commits: Callable[[], int] | None = None) -> None:
    """Kill the run ``process`` at ``instant`` (``INSTANTS``) of its target's commit:
    ``commits`` counts the target's commits on storage, ``data`` its data files, and
    ``state_commits`` the runs table's (default: a state root in the workspace)."""
    committed = appears(commits)
    if instant == "before":
        assert data is not None, "no data files to watch"
        kill_at(process, appears(data), "its data files appeared")
    elif instant == "state":
        wait_for(process, committed, "its target committed")
        runs_log = state_commits or files(ws.root / "state" / "runs" / "_delta_log", "*.json")
        kill_at(process, appears(runs_log), "its state commit after the target's")
    else:
        kill_at(process, committed, f"its target committed ({instant})",
                delay=0.2 if instant == "after" else 0.0)


def objects(prefix: str, pattern: str, *, recursive: bool = False) -> Callable[[], int]:
    """How many objects under ``prefix`` (a path or URI, S3's too) have a name matching
    ``pattern`` (``fnmatch``'s)."""
    return lambda: len(object_names(prefix, pattern, recursive=recursive))


def object_names(prefix: str, pattern: str, *, recursive: bool = False) -> list[str]:
    """The names of the objects under ``prefix`` (a path or URI) matching ``pattern``."""
    import fnmatch

    import pyarrow.fs as pafs

    from framework import storage

    fs, root, _ = storage.filesystem(prefix)
    return [f.base_name for f in fs.get_file_info(
        pafs.FileSelector(root, allow_not_found=True, recursive=recursive))
        if fnmatch.fnmatchcase(f.base_name, pattern)]


def _watched(ws, kind: str, target: str, db=None):
    """A ``kind`` target's commits on storage, its data files (None: not files), and how
    to read its rows as (id, source file name)."""
    if kind == "delta":
        return files(f"{target}/_delta_log", "*.json"), files(target, "*.parquet"), ws.rows
    if kind == "parquet":
        return (files(f"{target}/_deltamark/commits", "*.json"),
                files(f"{target}/_deltamark/staging", "**/*.parquet"),
                lambda t: sorted((r.id, r.source_file.rsplit("/", 1)[-1])
                                 for r in ws.spark.read.parquet(t).collect()))

    polling = []  # PostgreSQL: one connection, as a new one a poll would see the commit late

    def marks() -> int:
        count = "SELECT count(*) FROM deltamark_commits"
        try:
            if db.kind == "sqlite":  # not waiting on the run's write lock
                with sqlite3.connect(db.dsn, timeout=0) as conn:
                    return conn.execute(count).fetchone()[0]
            if not polling:
                import psycopg

                polling.append(psycopg.connect(db.dsn, autocommit=True))
            return polling[0].execute(count).fetchone()[0]
        except Exception:  # noqa: BLE001 - not made yet, or (SQLite) locked by the run
            return 0

    return marks, None, lambda t: sorted((i, f.rsplit("/", 1)[-1])
                                         for i, f in db.query(f"SELECT id, source_file FROM {t}"))


@pytest.mark.parametrize("kind", ["delta-native", "delta-embedded", "parquet", "sqlite",
                                  "postgresql"])
def test_a_run_killed_from_outside_as_its_target_commits_lands_every_row_once(
        tmp_path, spark, request, kind):
    """The run and its JVM SIGKILLed as the target's commit appears on its storage (in
    CI; at every instant with DELTAMARK_FULL_MATRIX=1); the next run recovers."""
    from databases import sqlite_database
    from workspace import Workspace

    ws = Workspace(tmp_path, spark, delta=kind.removeprefix("delta-") if "-" in kind
                   else "auto")
    staged = staged_files
    if kind in ("sqlite", "postgresql"):
        db = sqlite_database(tmp_path) if kind == "sqlite" else \
            request.getfixturevalue("pg_server").database()
        ws.connect(db)
        target, (commits, data, rows) = "landed", _watched(ws, "jdbc", "landed", db)
        staged = staged_tables(db)
        ws.declare(cls="CopyFilesTo", kind="jdbc", target=target, connection="db",
                   lineage="source_file")
    else:
        target, (commits, data, rows) = ws.target, _watched(ws, kind.split("-")[0], ws.target)
        ws.declare(cls="CopyFilesTo", kind=kind.split("-")[0], lineage="source_file")
    for instant in INSTANTS if FULL_MATRIX else ["at"]:
        if instant == "before" and data is None:
            continue
        ws.land(rows=2)
        kill_when_committing(ws, ws.start_run("copy", own_group=True), instant, commits,
                             data)
        killed = killed_run(ws.store, instant)
        ws.land(rows=1)
        assert ws.run().status == "succeeded", instant
        assert_recovered(ws.store, killed, instant)
        assert_exactly_once(ws, target, rows=rows, staged=staged)


@pytest.fixture
def copy_job(ws):
    ws.declare(lineage="source_file")
    return ws


def crashes_then_recovery(ws, steps) -> None:
    """For each step: a run killed there, then one that recovers; every row once."""
    for step in steps:
        ws.land(rows=2)
        crash(ws, "copy", step)
        ws.land(rows=1)
        report = ws.run()
        assert report.status == "succeeded"
        assert_exactly_once(ws, ws.target)
    actions = [r.recovery for r in ws.store.runs("copy") if r.recovery]
    assert set(actions) == {"aborted", "replayed"}, actions


@pytest.mark.parametrize("delta_path", ["embedded"], indirect=True)  # its runs start sooner
def test_a_crash_at_each_step_of_the_protocol_then_recovery(copy_job, delta_path):
    """The steps that are the same on either Delta path and Spark line (the runner's)."""
    crashes_then_recovery(copy_job, PROTOCOL_STEPS)


@pytest.mark.compat
def test_a_crash_around_the_target_commit_then_recovery(copy_job, delta_path):
    """The steps each Delta path takes its own way (every step: DELTAMARK_FULL_MATRIX=1)."""
    crashes_then_recovery(copy_job, STEPS if FULL_MATRIX else ENGINE_STEPS)


def test_a_run_left_committing_by_an_older_version_is_replayed(copy_job):
    ws = copy_job
    ws.land(rows=2)
    crash(ws, "copy", "returned")
    crashed = ws.store.last_run("copy")
    ws.store.record_run(dataclasses.replace(crashed, status="committing"))
    report = ws.run()
    assert report.recovered.action == "replayed"
    assert_exactly_once(ws, ws.target)


def test_random_crash_points_then_recovery(copy_job):
    """A first run ends on its own, and says how long a run lasts; each later run is
    killed at a random moment from 20% to 85% of that (so while it runs: the test fails if it
    ended first), then the next run recovers."""
    ws = copy_job
    rng = random.Random(SEED)
    ws.land(rows=2)
    started = time.monotonic()
    first = ws.start_run("copy")
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-2000:]
    lasted = time.monotonic() - started
    for scenario in range(RANDOM_SCENARIOS):
        ws.land(rows=2)
        process = ws.start_run("copy")
        delay = rng.uniform(0.2, 0.85) * lasted
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        _out, err = process.communicate()
        where = (f"crash seed {SEED} (DELTAMARK_CRASH_SEED), scenario {scenario}, kill "
                 f"{delay:.1f} s into a run (a whole run took {lasted:.1f} s)")
        assert process.returncode == -signal.SIGKILL, f"{where}: the run ended first\n{err}"
        ws.land(rows=1)
        ws.run()
        try:
            assert_exactly_once(ws, ws.target)
        except AssertionError as failed:
            raise AssertionError(f"{where}: {failed}") from failed


@pytest.mark.parametrize("point", ["target_committed:1", "planned:2", "target_committed:2"])
def test_two_targets_recovery_completes_only_the_missing_one(ws, point):
    archive = str(ws.root / "lake" / "archive")
    ws.declare(cls="TwoTargets", archive=archive)
    ws.land(rows=2)
    ws.run()
    ws.land(rows=2)
    crash(ws, "copy", point)
    report = ws.run()
    assert report.recovered.action == "replayed"
    assert_exactly_once(ws, ws.target, archive)
    replay = next(r for r in ws.store.runs("copy") if r.recovery == "replayed")
    assert replay.run_seq == 2 and replay.attempt == 2
    first_target_skipped = point != "planned:1"
    assert replay.outputs[ws.target]["replayed"] is first_target_skipped


def test_one_run_at_a_time_and_a_dead_run_does_not_block(ws):
    flag = ws.root / "started"
    ws.declare(cls="Slow", sleep_s="60", started_flag=str(flag))
    ws.land(rows=2)
    slow = ws.start_run("copy")
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert time.monotonic() < deadline and slow.poll() is None, slow.stderr.read()
            time.sleep(0.2)
        running_id = flag.read_text()
        with pytest.raises(ConcurrentRunError) as refused:
            ws.run()
        assert refused.value.job == "copy" and refused.value.holder["run_id"] == running_id
        assert f"run {running_id} (pid {slow.pid}" in str(refused.value)
        assert lease_holder(ws.root / "state", "copy")["run_id"] == running_id
    finally:
        slow.send_signal(signal.SIGKILL)
        slow.communicate()
    assert lease_holder(ws.root / "state", "copy") is None
    ws.declare(lineage="source_file")
    shown = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "run", "copy"])
    assert shown.exit_code == 0, shown.output
    assert f"copy: first recovered the interrupted run 1 ({running_id}): aborted" in shown.stdout
    assert_exactly_once(ws, ws.target)


def test_a_fenced_run_counts_as_neither_landed_nor_held(tmp_path):
    """A recovery fences an unlanded run out of each Delta target (its app transaction
    committed alone): a write of it still under way skips or fails, and the fence is not
    taken for the run's commit by a later recovery, a later run or a restore."""
    import json

    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from framework.sinks.delta import DeltaTarget, app_id

    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": [1]}), commit_properties=CommitProperties(
        app_transactions=[Transaction(app_id("j"), 1)], custom_metadata={"userMetadata":
        json.dumps({"deltamark": {"job": "j", "run_seq": 1, "run_id": "r1"}})}))
    target = DeltaTarget(table)
    target.discard("j", 2)
    target.discard("j", 2)  # a second recovery of the same run commits nothing more
    assert len(DeltaTable(table).history()) == 2  # the write, one fence
    assert DeltaTable(table).transaction_version(app_id("j")) == 2
    assert target.landed("j", 1) and not target.landed("j", 2)
    assert target.runs("j", after_seq=1) == []
    assert [r.run_seq for r in target.runs("j")] == [1]
    assert target.restore_blockers("j", 1) == []
