import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import log
from framework.delta.log import read as log_read
from framework.delta.log import table as log_table
from framework.errors import DeltamarkError, StateSchemaError
from framework.state.table_io import MAINTENANCE_EVERY, open_store
from state_tables import contexts as contexts_module
from state_tables.model import Bookmark, ProcessedFile, Run
from state_tables.rows import python_rows
from state_tables.schemas import BOOKMARKS, RUNS, TABLES
from state_tables.sql import run_sql

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def run(job, seq, status="succeeded"):
    return Run(job=job, run_id=f"{job}-{seq}", run_seq=seq, status=status, mode="enable",
               started_at=T0 + dt.timedelta(hours=seq), arguments={"day": str(seq)})


def mark(job, ctx, seq, **state):
    return Bookmark(job=job, context=ctx, run_id=f"{job}-{seq}", run_seq=seq,
                    source_kind="files", state=state)


def test_the_state_tables_import_nothing_of_framework():
    # the arrows point one way: framework opens the store with its delta-rs TableIO
    script = ("import pkgutil, sys, state_tables\n"
              "names = sorted(m.name for m in pkgutil.iter_modules(state_tables.__path__))\n"
              "for name in names: __import__(f'state_tables.{name}')\n"
              "print(names, sorted(m for m in sys.modules if m.partition('.')[0] == 'framework'))")
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert found.stdout.strip() == ("['codecs', 'contexts', 'errors', 'model', 'rows', "
                                    "'schemas', 'sql', 'store', 'tables', 'validity'] []")


def test_an_error_of_the_state_tables_masks_secrets_like_every_deltamark_error():
    error = StateSchemaError("s3://user:hunter22@bucket/state/runs", 9, 1)
    assert isinstance(error, DeltamarkError)
    assert "hunter22" not in str(error) and "user:***@bucket" in str(error)


def test_tables_are_created_on_first_use_and_read_back(tmp_path):
    store = open_store(tmp_path)
    assert store.runs() == [] and store.bookmarks("a") == []
    store.record_run(run("a", 1), bookmarks=[mark("a", "src", 1, high_water=10)])
    assert log.is_table(str(tmp_path / "runs")) and log.is_table(str(tmp_path / "bookmarks"))
    [got] = store.runs("a")
    assert got == run("a", 1)
    [bookmark] = store.bookmarks("a")
    assert bookmark.state == {"high_water": 10} and bookmark.event == "commit"


def test_current_bookmark_is_the_newest_per_context(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1),
                     bookmarks=[mark("a", "src", 1, hw=1), mark("a", "other", 1, hw=5)])
    store.record_run(run("a", 2), bookmarks=[mark("a", "src", 2, hw=2)])
    store.record_run(run("b", 1), bookmarks=[mark("b", "src", 1, hw=99)])
    current = {b.context: b.state["hw"] for b in store.bookmarks("a")}
    assert current == {"src": 2, "other": 5}
    assert [b.state["hw"] for b in store.bookmarks("a", context="src")] == [2]
    assert [(r.job, r.run_seq) for r in store.runs()] == [("a", 1), ("a", 2), ("b", 1)]


def test_recent_runs_are_each_job_s_newest_in_their_current_status(tmp_path):
    store = open_store(tmp_path)
    for seq in range(1, 6):
        store.record_run(run("a", seq, "running"))
        store.record_run(run("a", seq, "failed" if seq == 5 else "succeeded"))
    store.record_run(run("b", 1))
    assert [(r.job, r.run_seq, r.status) for r in store.recent_runs(2)] == [
        ("a", 4, "succeeded"), ("a", 5, "failed"), ("b", 1, "succeeded")]
    assert [r.run_seq for r in store.recent_runs(3, "a")] == [3, 4, 5]
    assert open_store(tmp_path / "empty").recent_runs(3) == []
    # an hourly job's runs that found nothing new: the last ones that did not, on request
    for seq in range(6, 9):
        store.record_run(run("a", seq, "skipped"))
    assert [r.run_seq for r in store.recent_runs(2, "a")] == [7, 8]
    assert [(r.run_seq, r.status) for r in store.recent_runs(2, "a", skipped=False)] == [
        (4, "succeeded"), (5, "failed")]
    assert store.skipped_runs({"a-4", "a-6", "a-8", "nope"}) == {"a-6", "a-8"}
    assert store.holds_state() and not open_store(tmp_path / "empty").holds_state()


def test_maintenance_keeps_the_number_of_live_files_bounded(tmp_path):
    store = open_store(tmp_path)
    for seq in range(1, 2 * MAINTENANCE_EVERY + 5):
        store.record_run(run("a", seq))
    live = log.snapshot(str(tmp_path / "runs")).files  # compacted, plus what came since
    assert len(live) <= MAINTENANCE_EVERY
    assert len(store.runs("a")) == 2 * MAINTENANCE_EVERY + 4
    assert any(f.endswith(".checkpoint.parquet") for f in os.listdir(tmp_path / "runs/_delta_log"))


def test_files_and_log_entries_go_once_past_the_retention(tmp_path):
    def footprint(store):
        return len([p for p in (tmp_path / store).rglob("*") if p.is_file()])

    kept, tidied = open_store(tmp_path / "kept"), open_store(tmp_path / "tidied",
                                                             retention_hours=0)
    for seq in range(1, 10 * MAINTENANCE_EVERY + 1):
        for store in (kept, tidied):
            store.record_run(run("a", seq), bookmarks=[mark("a", "src", seq)])
    assert footprint("kept") > 2 * 10 * MAINTENANCE_EVERY  # within the hour: all kept
    assert footprint("tidied") < 4 * MAINTENANCE_EVERY
    for store in (kept, tidied):
        assert [r.run_seq for r in store.runs("a")] == list(range(1, 10 * MAINTENANCE_EVERY + 1))
        assert store.bookmarks("a", up_to_seq=1)[0].run_id == "a-1"
    assert log.snapshot(str(tmp_path / "kept" / "runs")).configuration[
        "delta.logRetentionDuration"] == "interval 1 hours"


def test_rows_from_a_newer_deltamark_are_refused(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1))
    row = {**{c: None for c in RUNS.docs()}, "schema_version": 99, "job": "a", "run_id": "x",
           "run_seq": 2, "attempt": 1, "status": "succeeded", "mode": "enable",
           "started_at": T0, "arguments": "{}"}
    log.append_rows(store.path(RUNS), pa.Table.from_pylist([row], schema=RUNS.schema))
    with pytest.raises(StateSchemaError) as error:
        store.runs("a")
    found = (error.value.table, error.value.found, error.value.supported)
    assert found == ("runs", 99, RUNS.version)


def test_runs_written_by_schema_version_1_are_upgraded(tmp_path):
    store = open_store(tmp_path)
    v1_columns = [c for c in RUNS.columns if c[0] not in ("inputs", "outputs", "updated_at")]
    v1 = pa.schema([pa.field(n, t, nullable=null) for n, t, null, _ in v1_columns])
    row = {"schema_version": 1, "job": "a", "run_id": "old", "run_seq": 1, "attempt": 1,
           "status": "succeeded", "mode": "enable", "started_at": T0, "ended_at": None,
           "arguments": "{}", "error": None}
    log.append_rows(store.path(RUNS), pa.Table.from_pylist([row], schema=v1))
    store.record_run(run("a", 2))
    old, new = store.runs("a")
    assert (old.run_id, old.inputs, old.outputs) == ("old", {}, {})
    assert new == run("a", 2)
    # the new columns went in delta-rs's own file: none written beside it is left
    assert len(list(Path(store.path(RUNS)).glob("*.parquet"))) == 2


def test_a_run_shows_its_newest_status(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1, status="running"))
    assert [r.status for r in store.runs("a")] == ["running"]
    store.record_run(run("a", 1))
    store.record_run(run("a", 2, status="running"))
    assert [r.status for r in store.runs("a")] == ["succeeded", "running"]


def test_processed_files_by_time_and_path(tmp_path):
    store = open_store(tmp_path)
    files = [ProcessedFile("a", "src", "a-1", 1, f"/in/{i}.json", 10, 1000 + i) for i in range(5)]
    store.record_run(run("a", 1), bookmarks=[mark("a", "src", 1)], files=files)
    assert store.processed_files("a", "src", modified_after_ms=1002) == files[3:]
    assert store.processed_files("a", "src", paths=["/in/0.json", "/in/x"]) == files[:1]
    assert store.processed_files("a", "src", paths=[]) == []
    assert store.processed_files("a", "other") == []


def test_every_column_is_documented():
    for table in TABLES.values():
        assert all(doc.strip() for doc in table.docs().values())
        assert table.schema.names[0] == "schema_version"


def test_sql_over_tables_and_views(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1), bookmarks=[mark("a", "src", 1, hw=1)])
    store.record_run(run("a", 2), bookmarks=[mark("a", "src", 2, hw=2)])
    rows = run_sql(store, "SELECT job, run_seq FROM current_bookmarks").to_pylist()
    assert rows == [{"job": "a", "run_seq": 2}]
    assert run_sql(store, "select count(*) AS n from runs where status = 'succeeded'"
                   ).to_pylist() == [{"n": 2}]
    assert run_sql(store, "SELECT 'delete' AS word -- drop").to_pylist() == [{"word": "delete"}]
    store.record_run(run("a", 3, status="running"))
    store.record_run(run("a", 3, status="failed"))
    assert run_sql(store, "SELECT run_seq, status FROM current_runs ORDER BY run_seq"
                   ).to_pylist()[-1] == {"run_seq": 3, "status": "failed"}


@pytest.mark.parametrize("statement", [
    "DELETE FROM runs",
    "INSERT INTO runs SELECT * FROM runs",
    "WITH x AS (SELECT 1) INSERT INTO runs SELECT * FROM x",
    "SELECT 1; DROP TABLE runs",
    "CREATE TABLE t AS SELECT 1",
    "",
    "COPY runs TO '{tmp}/copied.csv'",
    "COPY (SELECT E'\\'' AS x) TO '{tmp}/escaped.csv'",
    "SET datafusion.execution.batch_size = 1",
    "DROP VIEW current_runs",
    "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{tmp}'",
    "EXPLAIN ANALYZE COPY runs TO '{tmp}/copied.csv'",
    "/*" + "x" * 60_000,
])
def test_sql_refuses_anything_but_one_query(tmp_path, statement):
    store = open_store(tmp_path)
    store.record_run(run("a", 1))
    started = time.perf_counter()
    with pytest.raises(DeltamarkError) as refused:
        run_sql(store, statement.format(tmp=tmp_path))
    assert time.perf_counter() - started < 2  # an unterminated comment is no slower
    assert str(refused.value).startswith("sql: ") and "\n" not in str(refused.value)
    assert len(store.runs()) == 1
    assert not list(tmp_path.glob("*.csv"))


def test_sql_reads_what_only_looks_like_a_write(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1))
    assert run_sql(store, "SELECT E'\\'' AS q, 'drop table runs' AS w /* delete */"
                   ).to_pylist() == [{"q": "'", "w": "drop table runs"}]
    assert "runs" in {r["table_name"] for r in run_sql(store, "SHOW TABLES").to_pylist()}


def test_sql_on_a_new_state_root_sees_empty_tables(tmp_path):
    store = open_store(tmp_path / "new")
    assert run_sql(store, "SELECT count(*) AS n FROM runs").to_pylist() == [{"n": 0}]
    assert run_sql(store, "SELECT * FROM current_bookmarks").num_rows == 0
    assert not (tmp_path / "new").exists()  # queried, not created


def test_valid_runs_follow_rewinds_and_resets(tmp_path):
    store = open_store(tmp_path)
    for seq in (1, 2, 3):
        store.record_run(run("a", seq), bookmarks=[mark("a", "src", seq, n=seq)])

    def event(kind, at, to=None):
        store.record_bookmarks([Bookmark(
            job="a", context="src", run_id=f"a-{to}", run_seq=at, source_kind="files",
            state={"n": to} if to else {}, event=kind, restored_from_seq=to)])

    event("rewind", 3, to=1)
    assert store.histories("a")["src"].valid_runs == {1}
    for seq in (4, 5):
        store.record_run(run("a", seq), bookmarks=[mark("a", "src", seq, n=seq)])
    event("rewind", 5, to=4)
    history = store.histories("a")["src"]
    assert history.valid_runs == {1, 4} and history.current.state == {"n": 4}
    event("rewind", 5, to=2)  # back before the first rewind: run 2's own past
    assert store.histories("a")["src"].valid_runs == {1, 2}
    store.record_run(run("a", 6, status="failed"), bookmarks=[mark("a", "src", 6, n=6)])
    assert store.bookmarks("a")[0].state == {"n": 2}  # a failed run's plan never counts
    event("reset", 6)
    assert store.bookmarks("a") == [] and store.histories("a")["src"].valid_runs == set()
    assert store.bookmarks("a", up_to_seq=3)[0].state == {"n": 3}


def test_a_long_history_resolves_from_its_newest_rows_as_from_all_of_them(tmp_path,
                                                                         monkeypatch):
    """With a context named, its bookmark is resolved from the rows of its last runs (and
    its rewinds and resets), and older runs' validity is read when asked: the same answers
    as resolving every row, when the old events matter and when the last runs all failed."""
    monkeypatch.setattr(contexts_module, "RECENT_RUNS", 3)
    store = open_store(tmp_path)
    failed = {4, 9, 14, 15, 16, 17, 18}
    for seq in range(1, 19):
        store.record_run(run("a", seq, "failed" if seq in failed else "succeeded"),
                         bookmarks=[mark("a", "src", seq, n=seq), mark("a", "other", seq, n=seq)])
        if seq in (6, 11):  # a rewind to run 2, then a reset of the other context
            store.record_bookmarks([Bookmark(
                job="a", context="src" if seq == 6 else "other", run_id="x", run_seq=seq,
                source_kind="files", state={"n": 2} if seq == 6 else {},
                event="rewind" if seq == 6 else "reset",
                restored_from_seq=2 if seq == 6 else None)])
    for up_to in (None, 3, 6, 8, 12, 18):
        every = store.histories("a", up_to_seq=up_to)  # no context: every row is resolved
        for context in ("src", "other"):
            log.forget_open_tables()
            newest = store.histories("a", context=context, up_to_seq=up_to)
            assert newest.keys() <= every.keys() and every.get(context) == newest.get(context)
            if context in every:
                assert {s for s in range(20) if s in newest[context].valid_runs} \
                    == set(every[context].valid_runs) == set(newest[context].valid_runs)
    assert set(every["src"].valid_runs) == {1, 2, 7, 8, 10, 11, 12, 13}
    assert every["src"].current.state == {"n": 13} and every["other"].valid_runs == {12, 13}

    plain = open_store(tmp_path / "plain")  # no rewinds: old files are not even opened
    plain.io.upkeep = dataclasses.replace(plain.io.upkeep, compact_every=1_000)  # tidied below
    for seq in range(1, 9):
        plain.record_run(run("a", seq), bookmarks=[mark("a", "src", seq, n=seq)])
    plain.tidy()
    [old_runs] = log_table._open(plain.path(BOOKMARKS)).file_uris()
    for seq in range(9, 13):
        plain.record_run(run("a", seq), bookmarks=[mark("a", "src", seq, n=seq)])
    log.forget_open_tables()
    opened = []
    read_file = log_read._read_file
    monkeypatch.setattr(log_read, "_read_file", lambda uri, schema: opened.append(uri)
                        or read_file(uri, schema))
    history = plain.histories("a", context="src")["src"]
    assert history.current.state == {"n": 12} and old_runs not in opened
    assert 2 in history.valid_runs and old_runs in opened  # read when asked about run 2


def test_bookmarks_written_by_schema_version_1_are_upgraded(tmp_path):
    store = open_store(tmp_path)
    store.record_run(run("a", 1))
    v1 = pa.schema([f for f in BOOKMARKS.schema if f.name != "restored_from_seq"])
    row = {"schema_version": 1, "job": "a", "context": "src", "run_id": "a-1", "run_seq": 1,
           "source_kind": "files", "state": '{"n": 1}', "event": "commit", "committed_at": T0}
    log.append_rows(store.path(BOOKMARKS), pa.Table.from_pylist([row], schema=v1))
    [bookmark] = store.bookmarks("a")
    assert (bookmark.state, bookmark.restored_from_seq) == ({"n": 1}, None)
    assert store.histories("a")["src"].valid_runs == {1}


def _append(path, writer):
    log.append_rows(path, pa.table({"writer": [writer]}))


def _commit_a_file(path, writer):
    name = f"part-{writer}.parquet"
    os.makedirs(path, exist_ok=True)
    pq.write_table(pa.table({"writer": [writer]}), os.path.join(path, name))
    schema = {"type": "struct", "fields": [{"name": "writer", "type": "string",
                                            "nullable": True, "metadata": {}}]}
    log.commit_files(path, [log.NewFile(name, os.path.getsize(os.path.join(path, name)), {},
                                        0, "")],
                     mode="append", schema_json=json.dumps(schema), partition_by=())


def _two_writers_at_once(path, first_commit):
    """Writers a and b each make ``first_commit`` then an append, starting together."""
    start, failures = threading.Barrier(2), []

    def write(writer):
        start.wait()
        try:
            first_commit(path, writer)
            _append(path, writer + "2")
        except Exception as exc:  # noqa: BLE001 - the caller asserts there is none
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.mark.parametrize("first_commit", [_append, _commit_a_file])
def test_two_writers_creating_one_table_at_once_both_land_in_a_table_created_once(
        tmp_path, first_commit):
    """Two state commits (or embedded target writes) at once on a new root: delta-rs
    retried the losing creation as a second one, so one writer's next commit failed
    ("Metadata changed since last commit") or the table's schema was replaced. Before the
    fix this failed in about half of the rounds."""
    for attempt in range(12):
        path = tmp_path / f"t{attempt}"
        assert _two_writers_at_once(str(path), first_commit) == []
        rows = python_rows(log.read_rows(str(path)))
        assert sorted(r["writer"] for r in rows) == ["a", "a2", "b", "b2"]
        creations = [c.name for c in (path / "_delta_log").glob("*.json")
                     if '"metaData"' in c.read_text()]
        assert creations == ["00000000000000000000.json"]


def test_read_rows_filters_like_sql_across_files_with_added_columns(tmp_path):
    """State reads parse the Parquet files themselves (no pyarrow.dataset, no pandas)."""
    path = str(tmp_path / "t")
    log.append_rows(path, pa.table({"job": ["a", "b", None], "seq": [1, 2, 3]}))
    log.append_rows(path, pa.table({"job": ["a", "c"], "seq": [4, 5],
                                    "at": pa.array([T0, None], pa.timestamp("us", tz="UTC"))}))
    def read(filters, columns=None):  # files come in no particular order
        rows = python_rows(log.read_rows(path, filters=filters, columns=columns))
        return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))
    assert read([("job", "=", "a")]) == [{"job": "a", "seq": 1, "at": None},
                                         {"job": "a", "seq": 4, "at": T0}]
    assert read([("job", "!=", "a")], ["seq"]) == [{"seq": 2}, {"seq": 5}]  # null: no match
    assert read([("job", "in", ["b", "c"]), ("seq", ">", 2)], ["seq"]) == [{"seq": 5}]
    assert read([("job", "not in", ["a"]), ("seq", "<=", 2)], ["job"]) == [{"job": "b"}]
    assert read([("at", ">=", T0)], ["seq"]) == [{"seq": 4}]
    assert read([("seq", "in", [])]) == []
    assert log.read_rows(str(tmp_path / "none")) is None


def test_reads_of_the_newest_rows_open_only_the_files_that_may_hold_them(tmp_path):
    """A filter on an integer column, or on a short string, skips the files whose log
    statistics rule it out, and reads what a read of every file would; the newest rows are
    read from the newest files."""
    path = str(tmp_path / "t")
    for first in (1, 11, 21):
        log.append_rows(path, pa.table({"job": ["a"] * 10, "seq": range(first, first + 10)}))
    opened = []
    read_file = log_read._read_file
    log_read._read_file = lambda uri, schema: opened.append(uri) or read_file(uri, schema)
    try:
        newest = log.read_rows(path, filters=[("job", "=", "a"), ("seq", ">=", 25)])
        assert newest["seq"].to_pylist() == [25, 26, 27, 28, 29, 30] and len(opened) == 1
        opened.clear()
        assert log.read_rows(path, filters=[("seq", "in", [5, 15])])["seq"].to_pylist() \
            in ([5, 15], [15, 5]) and len(opened) == 3  # only bounds skip files
        opened.clear()
        assert sorted(log.read_rows(path, filters=[("seq", "<", 12)])["seq"].to_pylist()) \
            == list(range(1, 12)) and len(opened) == 2
        opened.clear()
        assert log.read_newest(path, column="seq", within=3)["seq"].to_pylist() \
            == [27, 28, 29, 30] and len(opened) == 1
        long = "x" * 40  # statistics this long may be truncated: they skip nothing
        log.append_rows(path, pa.table({"job": ["b", long], "seq": [31, 32]}))
        opened.clear()
        assert log.read_rows(path, filters=[("job", "=", "b")])["seq"].to_pylist() == [31] \
            and len(opened) == 1
        opened.clear()
        assert log.read_newest(path, column="seq", filters=[("job", "=", "a")])[
            "seq"].to_pylist() == [30] and len(opened) == 2  # the newest file holds no "a"
        opened.clear()
        assert len(log.read_rows(path, filters=[("job", "=", "x" * 41)])) == 0 \
            and len(opened) == 1
    finally:
        log_read._read_file = read_file


# --- bookmark states: one codec for every source kind ----------------------------------

STORED_STATES = {  # as the bookmarks table of earlier deltamark versions holds them
    "files": {"files_total": 12, "bytes_total": 3400, "too_old_total": 1,
              "listed_up_to": {"s3://landing/orders": "2026/01/01/00/part-9.json"},
              "full_listing_ms": 1767225600000, "state_version": 2},
    "delta": {"table": "lake/bronze/orders", "version": 7, "from_version": None},
    "jdbc": {"source": "pg/public.orders", "keys": ["updated_at", "id"], "order": "asc",
             "row_id": ["id"], "lookback": False,
             "position": {"values": ["2026-01-01 00:00:00", "41"], "boundary": [["41"]]},
             "from": None, "where": "id > 0", "rows": 41,
             "partitioning": ["id", "1", "41", 2]},
}


@pytest.mark.parametrize("kind", sorted(STORED_STATES))
def test_each_kind_s_stored_state_decodes_to_its_class_and_encodes_back_unchanged(kind):
    from framework.sources import KINDS
    from framework.sources.bookmark_codec import decode, encode

    state = decode(kind, STORED_STATES[kind])
    assert type(state).__name__ == KINDS[kind].rpartition(":")[2] and state.kind == kind
    assert encode(state) == STORED_STATES[kind]
    assert dataclasses.replace(state) == state  # frozen plain data


def test_processed_files_of_layout_1_read_as_read(tmp_path):
    """A state root written before processed_files had ``outcome``: its rows are files
    read, and the next rows add the column."""
    from state_tables.schemas import PROCESSED_FILES

    store = open_store(tmp_path / "state")
    old = pa.schema([f for f in PROCESSED_FILES.schema if f.name != "outcome"])
    log.append_rows(store.path(PROCESSED_FILES), pa.Table.from_pylist([
        {"schema_version": 1, "job": "j", "context": "c", "run_id": "r1", "run_seq": 1,
         "path": "/in/a.json", "size": 3, "modified_ms": 10}], schema=old))
    tracked = store.tracked_files("j", "c", {1})
    assert tracked.to_pylist() == [{"path": "/in/a.json", "size": 3, "modified_ms": 10,
                                    "outcome": "read"}]
    assert [f.outcome for f in store.processed_files("j", "c")] == ["read"]
    store.record_plan(Run(job="j", run_id="r2", run_seq=2, status="running", mode="enable",
                          started_at=dt.datetime.now(dt.UTC)),
                      files=[ProcessedFile(job="j", context="c", run_id="r2", run_seq=2,
                                           path="/in/b.json", size=4, modified_ms=20,
                                           outcome="too_old")])
    assert sorted(store.tracked_files("j", "c", {1, 2})["outcome"].to_pylist()) == [
        "read", "too_old"]


def test_a_file_state_from_before_tracking_by_name_keeps_its_settled_time():
    from framework.sources.bookmark_codec import decode, encode
    from framework.sources.files import FileState

    state = decode("files", {"settled_ms": 1767225600000, "files_total": 12,
                             "settled_at": "2026-01-01T00:00:00.000+00:00", "bytes_total": 3400})
    assert (state.settled_ms, state.files_total, state.listed_up_to) == (1767225600000, 12, {})
    assert "high-water mark" in dict(state.describe())
    assert encode(state)["settled_ms"] == 1767225600000
    # the bookmarks written since (no run sets it) carry none, nor a NULL
    since = decode("files", {**STORED_STATES["files"], "settled_ms": None})
    assert "settled_ms" not in encode(since) and "settled_ms" not in encode(FileState())


def test_states_written_before_a_field_existed_take_its_default():
    from framework.sources.bookmark_codec import decode

    older = {k: v for k, v in STORED_STATES["jdbc"].items() if k != "partitioning"}
    older["position"] = {"values": ["x", "1"]}
    state = decode("jdbc", older)
    assert state.partitioning is None and state.position.boundary == ()


def test_a_state_this_deltamark_cannot_read_is_refused_in_one_line_and_shown_raw():
    from framework.errors import BookmarkStateError
    from framework.sources.bookmark_codec import decode, describe

    with pytest.raises(BookmarkStateError, match=r"source kind 'files': its version 3 is "
                       "newer than this deltamark's .2.. Upgrade deltamark"):
        decode("files", {**STORED_STATES["files"], "state_version": 3})
    with pytest.raises(BookmarkStateError, match="'kafka': this deltamark has no such"):
        decode("kafka", {"offset": 5})
    assert describe("kafka", {"offset": 5}) == [("offset", "5")]
    with pytest.raises(BookmarkStateError, match=r"'files': \{'files_total': '3'\} is damaged "
                       r"\('3' is not of type int\). Reset its context"):
        decode("files", {"files_total": "3"})
    with pytest.raises(BookmarkStateError, match=r"'jdbc': .* is damaged"):
        decode("jdbc", {**STORED_STATES["jdbc"], "position": ["not", "an object"]})
    with pytest.raises(BookmarkStateError, match=r"damaged \('7' is not of type int\)"):
        decode("delta", {**STORED_STATES["delta"], "version": "7"})
    with pytest.raises(BookmarkStateError, match=r"damaged \(state_version 'x' is not a number"):
        decode("delta", {**STORED_STATES["delta"], "state_version": "x"})
    assert describe("delta", STORED_STATES["delta"])[1] == (
        "processed up to", "version 7 (the next run reads the versions after it)")


def test_many_processes_committing_and_tidying_at_once_never_lose_or_double_a_row(tmp_path):
    """Eight processes record 20 runs each on one state root at once: every run lands (no
    commit gives up after delta-rs's 15 rebases), and the tidies that fall due every
    ``MAINTENANCE_EVERY`` versions run one at a time, so no compaction adds a second copy
    of rows another compaction already moved (before the upkeep lease, two did)."""
    root = str(tmp_path / "state")
    writer = (
        "import sys, datetime as dt\n"
        "from framework.state.table_io import open_store\n"
        "from state_tables.model import Run\n"
        "store = open_store(sys.argv[1])\n"
        "for seq in range(1, 21):\n"
        "    store.record_run(Run(job=sys.argv[2], run_id=f'{sys.argv[2]}-{seq}', run_seq=seq,\n"
        "        status='succeeded', mode='enable', started_at=dt.datetime.now(dt.UTC)))\n")
    writers = [subprocess.Popen([sys.executable, "-c", writer, root, f"job{i}"],
                                stderr=subprocess.PIPE, text=True) for i in range(8)]
    for process in writers:
        assert process.wait(timeout=300) == 0, process.stderr.read()[-2000:]
    rows = log.read_rows(os.path.join(root, "runs"), columns=["job", "run_seq"])
    recorded = sorted(zip(rows["job"].to_pylist(), rows["run_seq"].to_pylist(), strict=True))
    assert recorded == [(f"job{i}", seq) for i in range(8) for seq in range(1, 21)]
    history = log.history(os.path.join(root, "runs"))
    assert sum(c.operation == "OPTIMIZE" for c in history) >= 3  # tidies ran meanwhile


def test_an_append_falling_due_while_another_process_tidies_leaves_the_tidy_to_it(tmp_path):
    """Another process holds the table's upkeep lease (it is tidying): an append at a
    version where a tidy falls due commits its rows and no compaction; once the lease is
    free, the next one due compacts."""
    path = str(tmp_path / "t")
    upkeep = log.Upkeep(retention_hours=168, compact_every=2)
    rows = pa.table({"a": [1]})
    log.append_rows(path, rows, upkeep=upkeep)  # version 0
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom framework.storage.lease import upkeep_lease\n"
         "with upkeep_lease(sys.argv[1]) as mine:\n    print(mine, flush=True)\n"
         "    time.sleep(120)\n", path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "True\n"
        assert [log.append_rows(path, rows, upkeep=upkeep) for _ in range(2)] == [1, 2]
        assert not [c for c in log.history(path) if c.operation == "OPTIMIZE"]
    finally:
        holder.kill()
        holder.wait()
    assert [log.append_rows(path, rows, upkeep=upkeep) for _ in range(2)] == [3, 4]
    assert [c.operation for c in log.history(path)].count("OPTIMIZE") == 1
    assert len(log.read_rows(path)) == 5


def _commit_turn_held(path: str, *, seconds: float) -> subprocess.Popen:
    """A process holding the table's commit turn for ``seconds`` (it holds it once this
    returns)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom framework.storage.lease import commit_turn\n"
         "with commit_turn(sys.argv[1], 5):\n    print('held', flush=True)\n"
         "    time.sleep(float(sys.argv[2]))\n", path, str(seconds)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_appends_on_a_local_disk_take_turns_and_one_kept_waiting_fails_in_one_line(tmp_path):
    """Another process holds the table's commit turn: an append waits for it (it does not
    race, losing and rewriting), commits once the turn is free, and past its patience
    fails in one line naming the lock, having written nothing."""
    store = open_store(tmp_path / "state", commit_timeout_seconds=1.0)
    store.record_run(run("a", 1))
    path = store.path(RUNS)
    holder = _commit_turn_held(path, seconds=120)
    try:
        with pytest.raises(DeltamarkError) as failed:
            store.record_run(run("a", 2))
        message = str(failed.value)
        assert "\n" not in message and "_commit.lock" in message
        assert "nothing was written" in message
    finally:
        holder.kill()
        holder.wait()
    assert [r.run_seq for r in store.runs("a")] == [1]
    holder = _commit_turn_held(path, seconds=0.5)
    started = time.monotonic()
    store.record_run(run("a", 2))  # waits for the turn, within its patience
    assert time.monotonic() - started >= 0.3
    assert holder.wait(timeout=30) == 0
    assert [r.run_seq for r in store.runs("a")] == [1, 2]
    assert len(log.history(path)) == 2  # two commits: none lost a race and retried


def test_vacuum_removes_the_copies_two_tidies_at_once_left(tmp_path, monkeypatch):
    """A state root where two compactions at once each added a copy of the same rows (what
    delta-rs's conflict checker lets through): ``tidy`` (``deltamark state vacuum``)
    removes every copy, keeps every row once and says how many it removed."""
    from deltalake import DeltaTable

    store = open_store(tmp_path / "state")
    for seq in range(1, 6):
        store.record_run(run("a", seq))
    path = store.path(RUNS)
    first, second = DeltaTable(path), DeltaTable(path)  # two processes' snapshots
    first.optimize.compact()
    second.optimize.compact()
    assert len(log.read_rows(path)) == 10  # each row twice
    store.record_run(run("a", 6))  # a row appended after the copies: kept
    store.record_bookmarks([mark("a", "src", 6)])

    vacuum = CliRunner().invoke(app, ["--conf-dir", str(tmp_path / "no-conf"), "--state-root",
                                      str(tmp_path / "state"), "state", "vacuum"])
    assert vacuum.exit_code == 0, vacuum.output
    assert "removed 5 duplicated row(s)" in next(
        line for line in vacuum.output.splitlines() if line.startswith("runs:"))
    assert "duplicated" not in vacuum.output.replace(
        "removed 5 duplicated row(s)", "", 1)  # from runs only
    assert sorted(r["run_seq"] for r in python_rows(log.read_rows(path))) == [1, 2, 3, 4, 5, 6]
    assert [r.run_seq for r in store.runs("a")] == [1, 2, 3, 4, 5, 6]
    assert all(size.copies_removed == 0 for size in store.tidy())


def test_a_state_commit_that_keeps_losing_fails_in_one_line_naming_the_table(
        tmp_path, monkeypatch):
    """A commit that other writers beat every time, until its patience runs out, fails
    with one line naming the table and what to do; it wrote nothing."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    store = open_store(tmp_path / "state", commit_timeout_seconds=1.0)
    store.record_run(run("a", 1))
    tries = []

    def always_beaten(*_args, **_kwargs):
        tries.append(time.monotonic())
        raise CommitFailedError("Failed to commit transaction: 15")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", always_beaten)
    with pytest.raises(DeltamarkError) as failed:
        store.record_run(run("a", 2))
    message = str(failed.value)
    assert "\n" not in message
    assert store.path(RUNS) in message and "nothing of this commit was written" in message
    assert "Run again" in message
    assert len(tries) >= 4 and tries[-1] - tries[0] < 1.5  # paused in between, then gave up
    monkeypatch.undo()
    assert [r.run_seq for r in store.runs("a")] == [1]
    assert len(list(Path(store.path(RUNS)).glob("*.parquet"))) == 1  # no file left
