"""Column watermarks recorded by runs, and the DynamoDB-style Watermarks API."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine
from framework.errors import JobFailedError
from framework.state import watermarks as wm_module
from framework.state.watermarks import WatermarkNotFoundError, Watermarks

T = dt.datetime(2026, 3, 16, 15, 45)


def land_events(ws, name, *pairs):
    (ws.landing / name).write_text("".join(
        json.dumps({"id": i, "ts": (T + dt.timedelta(minutes=m)).isoformat()}) + "\n"
        for i, m in pairs))


@pytest.mark.compat
def test_a_run_records_a_watermark_the_next_run_filters_with(ws):
    ws.declare(cls="WatermarkedCopy")
    land_events(ws, "a.json", (1, 0), (2, 5))
    ws.run()
    [mark] = ws.store.watermarks("copy")
    assert (mark.context, mark.column, mark.aggregate, mark.rows) == ("events", "ts", "max", 2)
    assert mark.value.replace(tzinfo=None) == T + dt.timedelta(minutes=5)
    assert mark.value_type == "timestamp"

    land_events(ws, "b.json", (3, 3), (4, 9))  # 3 is older than the watermark
    ws.declare(cls="WatermarkedCopy", fail="true")
    with pytest.raises(JobFailedError):
        ws.run()
    assert ws.store.watermarks("copy")[0].run_seq == 1  # a failed run's watermark never counts
    ws.declare(cls="WatermarkedCopy")
    ws.run()
    ids = sorted(r.id for r in delta_engine(ws.spark, mode="embedded").read(ws.target).collect())
    assert ids == [1, 2, 4]
    assert ws.store.watermarks("copy")[0].value.replace(tzinfo=None) == T + dt.timedelta(
        minutes=9)

    def deltamark(*args):
        return CliRunner().invoke(app, ["--conf-dir", str(ws.conf), *args])

    listed = json.loads(deltamark("watermarks", "list", "--json").stdout)
    assert [(w["job"], w["context"], w["run_seq"]) for w in listed] == [("copy", "events", 3)]
    first_run = ws.store.runs("copy")[0].run_id
    got = json.loads(deltamark("watermarks", "get", "copy", "--run", first_run, "--json").stdout)
    assert got[0]["run_seq"] == 1 and got[0]["value"].startswith("2026-03-16T15:50")
    unknown = deltamark("watermarks", "get", "copy", "--run", "nope")
    assert unknown.exit_code == 1 and "run nope: not in the runs table" in unknown.stderr


@pytest.mark.parametrize(("rows", "column", "found"), [
    ("SELECT 1 AS `a.b` UNION ALL SELECT 2", "a.b", 2),  # a column named with a dot
    ("SELECT X'00FF' AS b", "b", "column 'b' is binary; a watermark is a number, string"),
    ("SELECT named_struct('x', 1) AS s", "s", "column 's' is struct<x:int>; a watermark"),
])
def test_a_watermark_is_of_the_column_named_and_of_a_type_it_keeps(ws, rows, column, found):
    ws.declare(cls="WatermarkOn", rows=rows, column=column)
    if isinstance(found, int):
        ws.run()
        assert ws.store.watermarks("copy")[0].value == found
    else:  # it would come back as another type: a string, a list
        with pytest.raises(JobFailedError, match=found):
            ws.run()


def test_dynamodb_style_api(tmp_path):
    wm = Watermarks(table_name="glue-watermarks", state_root=tmp_path)
    item = wm.create_watermark_item(job_id="orders", run_id="jr_1",
                                    latest_data="2023-03-16 15:45:00", rows_collected=808)
    wm.add_watermark(item)
    wm.add_watermark(wm.create_watermark_item(job_id="orders", run_id="jr_2",
                                              latest_data="2023-03-17 09:00:00",
                                              rows_collected=12, source="s3://bucket/x"))
    last = wm.get_watermark(job_id="orders", run_id=wm.get_most_recent_run_id(job_id="orders"))
    assert last["watermarks"] == {"latest_data": "2023-03-17 09:00:00", "rows_collected": 12,
                                  "source": "s3://bucket/x"}
    assert wm.get_watermark(job_id="orders", run_id="jr_1")["watermarks"]["rows_collected"] == 808

    with pytest.raises(WatermarkNotFoundError, match=r"job nobody \(jobs there: orders\)"):
        wm.get_watermark(job_id="nobody", run_id="jr_1")
    with pytest.raises(WatermarkNotFoundError, match="no watermark for run jr_9"):
        wm.get_watermark(job_id="orders", run_id="jr_9")
    with pytest.raises(WatermarkNotFoundError):
        wm.get_most_recent_run_id(job_id="nobody")


def test_most_recent_is_by_commit_order_not_by_clock(tmp_path, monkeypatch):
    wm = Watermarks(table_name="wm", state_root=tmp_path)
    wm.add_watermark(wm.create_watermark_item(job_id="j", run_id="later_clock", x=1))

    class SlowClock(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2000, 1, 1, tzinfo=tz)

    monkeypatch.setattr(wm_module, "datetime", SlowClock)
    wm.add_watermark(wm.create_watermark_item(job_id="j", run_id="committed_last", x=2))
    assert wm.get_most_recent_run_id(job_id="j") == "committed_last"


def test_bad_table_names_and_items_are_clear_errors(tmp_path):
    from framework.errors import DeltamarkError

    with pytest.raises(DeltamarkError, match="watermark table 'a/b'"):
        Watermarks(table_name="a/b", state_root=tmp_path)
    with pytest.raises(DeltamarkError, match="the item lacks run_id"):
        Watermarks(table_name="t", state_root=tmp_path).add_watermark({"job_id": "j"})
