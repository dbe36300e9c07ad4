"""Malformed input is named, never silently loaded: bad_records fail, drop, quarantine;
a corrupt file is one line naming it; options that would skip files are refused."""

from __future__ import annotations

import pytest

from framework.delta import delta_engine, log
from framework.errors import JobFailedError, SourceError
from framework.sinks.delta import app_id

GOOD_THEN_BAD = '{"id": 1}\n{"id": 2, oops\n{"id": 3}\n'


def quarantine_rows(ws, table):
    df = delta_engine(ws.spark, mode="embedded").read(table)
    return sorted((r.context, r.file.rsplit("/", 1)[-1], r.line, r.record, r.run_seq)
                  for r in df.collect())


def test_a_malformed_record_fails_the_run_naming_the_file(ws):
    ws.declare()
    ws.land(rows=2)
    ws.run()
    bad = ws.land(rows=0, name="bad.json")
    bad.write_text(GOOD_THEN_BAD)
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    message = str(failed.value)
    assert f"{bad} line 2: " in message and "oops" in message
    assert "\n" not in message and "o57" not in message
    assert ws.ids() == [100, 101]  # nothing of the bad file, no _corrupt_record column
    bad.write_text('{"id": 1}\n{"id": 3}\n')  # fixed: the next run reads it
    ws.run()
    assert ws.ids() == [1, 3, 100, 101]


def test_a_csv_row_with_extra_fields_fails_naming_the_file(ws):
    ws.declare(format="csv", **{"option.header": "true"}, schema="id INT, name STRING")
    bad = ws.land(rows=0, name="people.csv")
    bad.write_text("id,name\n1,a\n3,c,extra\n")
    with pytest.raises(JobFailedError, match="Malformed CSV record: 3,c,extra") as failed:
        ws.run()
    assert str(bad) in str(failed.value)


def test_drop_leaves_malformed_records_out_and_counts_them(ws):
    ws.declare(bad_records="drop")
    ws.land(rows=0, name="bad.json").write_text(GOOD_THEN_BAD)
    report = ws.run()
    assert report.inputs["src"]["malformed"] == 1
    assert ws.ids() == [1, 3]
    columns = log.snapshot(ws.target).schema_json
    assert "corrupt" not in columns and "malformed" not in columns


def test_quarantine_writes_malformed_records_with_file_and_line_exactly_once(ws):
    table = str(ws.root / "lake" / "malformed")
    ws.declare(bad_records="quarantine", bad_records_table=table)
    ws.land(rows=0, name="a.json").write_text(GOOD_THEN_BAD)
    ws.land(rows=0, name="b.csv.json").write_text('nonsense\n{"id": 7}\n')
    report = ws.run()
    assert ws.ids() == [1, 3, 7]
    assert report.inputs["src"]["malformed"] == 2
    assert quarantine_rows(ws, table) == [("src", "a.json", 2, '{"id": 2, oops', 1),
                                          ("src", "b.csv.json", 1, "nonsense", 1)]
    # The quarantine commit is the run's, as any target's: a replay skips it.
    assert log.transaction_version(table, app_id("copy")) == 1
    ws.land(rows=1)
    ws.run()
    assert len(quarantine_rows(ws, table)) == 2


def test_quarantined_records_are_written_beside_a_source_read_again(ws, tmp_path):
    # a lookback reads rows again, so the run may not append them; its malformed records
    # are its own, read once, and still go to their table
    from databases import sqlite_database

    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (50)")
    table = str(ws.root / "lake" / "malformed")
    ws.connect(db)
    ws.declare(cls="TableAndFiles", connection="db", table="t", lookback="5",
               bad_records="quarantine", bad_records_table=table)
    ws.land(rows=0, name="a.json").write_text(GOOD_THEN_BAD)
    report = ws.run()
    assert ws.ids() == [1, 3, 50] and report.inputs["src"]["malformed"] == 1
    assert quarantine_rows(ws, table) == [("src", "a.json", 2, '{"id": 2, oops', 1)]


def test_a_corrupt_parquet_file_is_one_line_naming_it(ws):
    ws.declare(format="parquet")
    bad = ws.land(rows=0, name="broken.parquet")
    bad.write_text("not parquet at all")
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    message = str(failed.value)
    assert "\n" not in message and str(bad) in message and "not a Parquet file" in message
    assert isinstance(failed.value.cause, SourceError)


@pytest.mark.parametrize("params, said", [
    ({"option.ignoreCorruptFiles": "true"}, "option ignoreCorruptFiles would skip files"),
    ({"bad_records": "keep"}, "bad_records must be one of fail, drop, quarantine"),
    ({"bad_records": "quarantine"}, "bad_records='quarantine' and bad_records_table"),
    ({"format": "parquet", "bad_records": "drop"}, "applies to csv, json, xml files"),
])
def test_bad_options_are_refused_before_reading(ws, params, said):
    ws.declare(**params)
    ws.land()
    with pytest.raises(JobFailedError, match=said):
        ws.run()
    assert not log.is_table(ws.target)
