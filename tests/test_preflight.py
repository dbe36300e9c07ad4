"""A run with nothing new is skipped before Spark starts, and never wrongly; a run that
reads nothing writes no empty target version."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake

from framework.common.faults import CRASH_ENV
from framework.delta import log
from framework.errors import JobFailedError
from framework.run import slots


def test_nothing_new_is_skipped_and_touches_nothing(ws):
    ws.declare()
    ws.land()
    assert ws.run().status == "succeeded"
    version, bookmarks = log.table_version(ws.target), ws.store.bookmarks("copy")
    report = ws.run()
    assert (report.status, report.run_seq) == ("skipped", 2)
    assert "nothing new in src" in report.preflight
    assert log.table_version(ws.target) == version
    assert ws.store.bookmarks("copy") == bookmarks
    assert [r.status for r in ws.store.runs("copy")] == ["succeeded", "skipped"]
    ws.land()
    assert ws.run().inputs["src"]["files"] == 1  # a new file: it runs
    assert ws.ids() == [100, 101, 102, 200, 201, 202]


#: what a run with nothing new never imports: the JVM's bridge, pandas (pyarrow imports it
#: on its own far too easily), typer's pydantic, the quality gate's library; of deltamark's,
#: the targets' code and what runs a job
NOT_ON_A_SKIP = {"pyspark", "py4j", "pandas", "pydantic", "great_expectations",
                 "framework.sinks", "framework.ops.actions", "framework.run.commit",
                 "framework.run.recovery", "framework.delta.engine"}


def imported(importtime_log: str) -> set[str]:
    """The modules a process imported (and the packages holding them), from its
    ``-X importtime`` lines."""
    names = {line.split("|")[2].strip() for line in importtime_log.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    return names | {name.split(".")[0] for name in names}


def test_a_skipped_run_starts_no_jvm_and_imports_only_what_it_needs(ws):
    """Without Java on the PATH a run that started Spark would fail."""
    ws.declare()
    ws.land()
    ws.run()
    no_java = {"PATH": os.path.dirname(sys.executable), "JAVA_HOME": str(ws.root / "none")}
    process = ws.start_run("copy", PYTHONPROFILEIMPORTTIME="1", **no_java)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "skipped run 2" in out and "without starting Spark" in out
    assert {"deltalake", "framework", "typer"} <= imported(err)  # the log is read right
    assert not imported(err) & NOT_ON_A_SKIP
    ws.land()
    process = ws.start_run("copy", **no_java)  # something new: it needs the JVM, not found
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "Spark could not start its JVM. Check that Java 17 is installed" in err, err


def test_runs_started_at_once_take_turns_for_the_machine_s_run_slots(ws, monkeypatch):
    """A ``deltamark run`` waits, asleep and before it loads its libraries, for one of the
    machine's run slots; a skip holds it to its end, a real run gives it back when it
    starts Spark."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(ws.root))
    monkeypatch.setenv(slots.SLOTS_ENV, "1")
    slot = os.path.join(slots.directory(), "0.lock")
    ws.declare()
    ws.land()
    slots.take()  # this process holds the machine's one slot
    assert ws.run().status == "succeeded"
    with open(slot) as other:  # the run gave it back: another holder can take it
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        waiting = ws.start_run("copy")
        deadline = time.monotonic() + 60
        while f"-> FLOCK  ADVISORY  WRITE {waiting.pid} " not in Path("/proc/locks").read_text():
            assert waiting.poll() is None and time.monotonic() < deadline, "it did not wait"
            time.sleep(0.05)
        assert "libarrow" not in Path(f"/proc/{waiting.pid}/maps").read_text()
        assert [r.status for r in ws.store.runs("copy")] == ["succeeded"]
    out, err = waiting.communicate(timeout=60)  # the slot is free: it goes on
    assert waiting.returncode == 0, err
    assert "skipped run 2" in out
    monkeypatch.setenv(slots.SLOTS_ENV, "two")
    wrong = ws.start_run("copy")
    assert wrong.communicate(timeout=60)[1].strip() == (
        "Error: DELTAMARK_RUN_SLOTS='two' is not a whole number of run slots (0: no limit)")
    assert wrong.returncode == 1


def test_dry_run_says_it_would_skip_and_records_nothing(ws):
    ws.declare()
    ws.land()
    ws.run()
    report = ws.run(dry_run=True)
    assert (report.status, report.dry_run) == ("skipped", True)
    assert [r.status for r in ws.store.runs("copy")] == ["succeeded"]


def first_run(ws, **params):
    ws.declare(**params)
    ws.land()
    assert ws.run().status == "succeeded"


@pytest.mark.parametrize("change", ["args", "conf", "mode", "force", "opt_out"])
def test_never_skipped_when_what_decides_the_run_changed_or_says_so(ws, change):
    first_run(ws)
    kwargs = {}
    if change == "args":
        kwargs["args"] = {"lineage": "source_file"}
    elif change == "conf":
        ws.declare(max_file_age_s="86400")
    elif change == "mode":
        kwargs["bookmark"] = "disable"
    elif change == "force":
        kwargs["force"] = True
    else:
        spec = yaml.safe_load((ws.conf / "jobs" / "copy.yaml").read_text())
        (ws.conf / "jobs" / "copy.yaml").write_text(
            yaml.safe_dump({**spec, "skip_when_nothing_new": False}))
    assert ws.run(**kwargs).status == "succeeded"


def test_never_skipped_when_the_jobs_code_changed(ws):
    code = ws.root / "code"
    code.mkdir()
    shutil.copy(Path(__file__).with_name("support_jobs.py"), code / "jobs_here.py")
    ws.declare(cls="CopyFiles")
    spec = yaml.safe_load((ws.conf / "jobs" / "copy.yaml").read_text())
    spec["class"] = f"{code / 'jobs_here.py'}:CopyFiles"
    (ws.conf / "jobs" / "copy.yaml").write_text(yaml.safe_dump(spec))
    ws.land()
    ws.run()
    assert ws.run().status == "skipped"
    (code / "helpers.py").write_text("RATE = 2\n")  # a helper beside the job's module
    assert ws.run().status == "succeeded"
    assert ws.run().status == "skipped"


def test_never_skipped_after_a_failed_run(ws):
    first_run(ws)
    flag = ws.root / "fail"
    ws.declare(cls="FailsWhenFlagged", flag=str(flag))
    assert ws.run().status == "succeeded"  # its conf changed: it runs
    flag.touch()
    with pytest.raises(JobFailedError):
        ws.run(force=True)
    flag.unlink()
    assert ws.run().status == "succeeded"  # nothing new, but the last run failed


def test_never_skipped_after_an_interrupted_run(ws):
    first_run(ws)
    subprocess.run([sys.executable, "-m", "framework", "--conf-dir", str(ws.conf), "run",
                    "copy", "--force"], cwd=ws.root, env={**os.environ, CRASH_ENV: "started"},
                   capture_output=True, timeout=120)
    assert ws.store.last_run("copy").status == "running"
    report = ws.run()  # nothing new, but the killed run needs recovery
    assert report.recovered.action == "aborted" and report.status == "succeeded"


def test_a_read_without_a_bookmark_is_never_planned_ahead(ws):
    ws.declare(cls="NoContext", track="false")
    ws.land()
    ws.run()
    assert ws.run().status == "succeeded"


def test_a_delta_source_is_planned_ahead(ws):
    upstream = str(ws.root / "upstream")
    write_deltalake(upstream, pa.table({"id": pa.array([1, 2], pa.int64())}))
    ws.declare(cls="DeltaCopy", source=upstream)
    ws.run()
    assert ws.run().status == "skipped"
    write_deltalake(upstream, pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    assert ws.run().inputs["src"]["versions"] == 1
    assert ws.run().status == "skipped"


def test_a_database_table_is_planned_ahead(ws, database):
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)",
                     "INSERT INTO orders VALUES (?, ?)", rows=[(1, 10), (2, 20)])
    ws.connect(database)
    ws.declare("copy", cls="TableCopy", connection="db", table="orders")
    ws.run()
    assert ws.run().status == "skipped"
    database.execute("INSERT INTO orders VALUES (?, ?)", rows=[(3, 30)])
    assert ws.run().inputs["db"]["rows"] == 1
    assert ws.run().status == "skipped"


def test_a_database_read_with_lookback_is_never_planned_ahead(ws, database):
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)",
                     "INSERT INTO orders VALUES (?, ?)", rows=[(1, 10)])
    ws.connect(database)
    ws.declare("copy", cls="TableCopy", connection="db", table="orders", lookback="5",
               merge_on="id")
    ws.run()
    assert ws.run().status == "succeeded"


@pytest.mark.parametrize("sink", ["delta", "parquet"])
def test_a_run_that_reads_nothing_writes_no_target_version(ws, delta_path, sink):
    ws.declare(cls="CopyFiles" if sink == "delta" else "CopyToParquet")
    ws.land()
    ws.run()
    before = sorted(p.relative_to(ws.root) for p in (ws.root / "lake").rglob("*"))
    report = ws.run(force=True)
    assert report.status == "succeeded" and report.outputs[ws.target]["written"] is False
    assert sorted(p.relative_to(ws.root) for p in (ws.root / "lake").rglob("*")) == before
    assert ws.store.last_run("copy").status == "succeeded"


def test_a_damaged_source_description_makes_the_run_go_ahead(ws):
    first_run(ws)
    last = ws.store.last_run("copy")
    ws.store.record_run(dataclasses.replace(  # as a damaged or hand-edited state would
        last, run_id="forged", run_seq=2, sources={"src": {"kind": "files", "paths": 7}}))
    report = ws.run()
    assert report.status == "succeeded" and "could not be planned ahead" in report.preflight


def test_a_source_kind_this_deltamark_does_not_know_makes_the_run_go_ahead(ws):
    first_run(ws)
    last = ws.store.last_run("copy")
    ws.store.record_run(dataclasses.replace(  # as a newer deltamark's source would
        last, run_id="newer", run_seq=2, sources={"src": {"kind": "hudi", "table": "t"}}))
    report = ws.run()
    assert report.status == "succeeded"
    assert report.preflight == "src cannot be planned before Spark starts"
