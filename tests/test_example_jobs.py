"""The example job and the demo's steps, through the CLI as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from databases import require_jar
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine, log
from framework.transforms import rejoin
from jobs import (
    customers_dms_landing,
    customers_source,
    order_documents_landing,
    orders_landing,
)

ROOT = Path(__file__).resolve().parents[1]


CONF = str(Path(__file__).parents[1] / "conf")


def deltamark(*args: str):
    return CliRunner().invoke(app, ["--conf-dir", CONF, *args])


def test_orders_ingest_loads_only_new_batches(spark, tmp_path):
    state, landing = str(tmp_path / "state"), tmp_path / "landing"
    target = str(tmp_path / "bronze")
    run = ["--state-root", state, "run", "orders_ingest", "--arg", f"landing={landing}",
           "--arg", f"target={target}"]
    orders_landing.land(landing, batches=3, orders=50)
    first = deltamark(*run)
    assert first.exit_code == 0, first.output
    assert "orders_ingest: run 1 succeeded" in first.stdout
    assert "read  orders_src: 3 of 3 files" in first.stdout

    orders_landing.land(landing, batches=2, orders=50)
    planned = deltamark(*run, "--dry-run")
    assert "read  orders_src: 2 of 5 files" in planned.stdout
    assert "batch-00004.json" in planned.stdout and "batch-00001.json" not in planned.stdout
    second = deltamark(*run)
    assert "run 2 succeeded" in second.stdout and "2 of 5 files" in second.stdout

    bronze = delta_engine(spark, mode="embedded").read(target)
    assert bronze.count() == 250 and bronze.select("order_id").distinct().count() == 250
    per_run = {r.loaded_by_run: r["count"] for r in bronze.groupBy("loaded_by_run").count()
               .collect()}
    assert per_run == {1: 150, 2: 100}

    shown = deltamark("--state-root", state, "bookmarks", "show", "orders_ingest", "--files")
    assert "orders_ingest / orders_src  (files; commit by run 2" in shown.stdout
    assert "totals          : 5 files" in shown.stdout
    assert shown.stdout.count("batch-0000") == 5

    listed = deltamark("--state-root", state, "runs", "list", "orders_ingest")
    assert "orders_src: 3 of 3 files" in listed.stdout
    assert "orders_src: 2 of 5 files" in listed.stdout


def test_silver_and_gold_chain_on_the_version_silver_published(spark, tmp_path):
    state, landing = str(tmp_path / "state"), tmp_path / "landing"
    bronze, silver, gold = (str(tmp_path / name) for name in ("bronze", "silver", "gold"))

    def run(job, *args):
        result = deltamark("--state-root", state, "run", job, "--json",
                           *(f"--arg={a}" for a in args))
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def chain():
        run("orders_ingest", f"landing={landing}", f"target={bronze}")
        return run("orders_silver", f"bronze={bronze}", f"target={silver}")["properties"]

    orders_landing.land(landing, batches=2, orders=30)
    assert chain() == {"silver_version": "0"}
    orders_landing.land(landing, batches=1, orders=30)
    assert chain() == {"silver_version": "1"}
    # gold as of silver version 0: the first two batches only, whatever silver has since
    published = run("orders_gold", f"silver={silver}", f"target={gold}",
                    "silver_version=0")["properties"]
    assert published == {"gold_version": "0"}
    table = delta_engine(spark, mode="embedded").read(gold)
    assert table.groupBy().sum("orders").first()[0] == 60
    assert table.count() == table.select("order_date", "country").distinct().count()
    run("orders_gold", f"silver={silver}", f"target={gold}")  # latest: all three batches
    assert delta_engine(spark, mode="embedded").read(gold).groupBy().sum("orders").first()[0] == 90


def test_run_usage_and_option_errors(tmp_path):
    bad_arg = deltamark("run", "orders_ingest", "--arg", "novalue")
    assert bad_arg.exit_code == 2 and "'novalue' is not KEY=VALUE" in bad_arg.output
    half_range = deltamark("--state-root", str(tmp_path), "run", "orders_ingest",
                           "--bookmark", "pause", "--bookmark-from", "r1")
    assert half_range.exit_code == 1
    assert half_range.stderr.strip().splitlines() == [
        "error: job orders_ingest: Missing option or value for --bookmark-to: pause with a "
        "range needs both --bookmark-from and --bookmark-to (or neither)."]
    unknown = deltamark("run", "nope")
    assert unknown.exit_code == 1 and "job nope: no " in unknown.stderr
    assert "orders_ingest" in unknown.stderr


def test_customers_sync_keeps_a_changing_table_current(spark, tmp_path):
    require_jar("sqlite")
    db, target = tmp_path / "shop.sqlite", str(tmp_path / "customers")
    run = ["--state-root", str(tmp_path / "state"), "run", "customers_sync",
           "--arg", f"connection=jdbc:sqlite:{db}", "--arg", f"target={target}"]
    customers_source.change(db, new=20, update=0)
    first = deltamark(*run)
    assert "read  customers_src: 20 rows" in first.stdout, first.output
    customers_source.change(db, new=3, update=4)
    second = deltamark(*run)
    # 7 changed rows, and the last row of run 1 again: it lies within the 5-minute lookback
    assert "read  customers_src: 8 rows" in second.stdout, second.output

    with sqlite3.connect(db) as conn:
        source = sorted(conn.execute("SELECT id, name, country FROM customers"))
    copied = delta_engine(spark, mode="embedded").read(target).select("id", "name", "country")
    assert sorted(tuple(r) for r in copied.collect()) == source


def documents_of(landing: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(landing.glob("*.json"))
            for line in path.read_text().splitlines()]


def lake_tables(spark, lake: Path) -> dict:
    engine = delta_engine(spark, mode="embedded")
    return {p.name: engine.read(str(p)) for p in sorted(lake.iterdir())}


def assert_documents_exactly_once(spark, landing: Path, lake: Path) -> None:
    documents = documents_of(landing)
    tables = lake_tables(spark, lake)
    lines = [line for d in documents for line in d["lines"]]
    assert tables["orders"].count() == len(documents)
    assert tables["orders_lines"].count() == len(lines)
    assert tables["orders_lines_discounts"].count() == sum(len(x["discounts"]) for x in lines)
    assert tables["orders_tags"].count() == sum(len(d["tags"]) for d in documents)
    back = {r.order_id: r for r in rejoin(tables, "orders").collect()}
    assert sorted(back) == sorted(d["order_id"] for d in documents)
    for d in documents:  # every child row is joined to its parent, in order
        assert [(x.sku, x.qty, [c.code for c in x.discounts]) for x in back[d["order_id"]].lines] \
            == [(x["sku"], x["qty"], [c["code"] for c in x["discounts"]]) for x in d["lines"]]


def test_order_documents_become_flat_tables_exactly_once(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    run = ["--state-root", str(tmp_path / "state"), "run", "order_documents",
           "--arg", f"landing={landing}", "--arg", f"lake={lake}"]
    order_documents_landing.land(landing, batches=2, orders=30)
    first = deltamark(*run)
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in lake.iterdir()) == [
        "orders", "orders_lines", "orders_lines_discounts", "orders_tags"]
    # a release adds lines[].gift_wrap: a new column, NULL for the earlier lines
    order_documents_landing.land(landing, batches=1, orders=30, gift_wrap=True)
    second = deltamark(*run)
    assert second.exit_code == 0, second.output
    lines = lake_tables(spark, lake)["orders_lines"]
    assert "lines.val.gift_wrap" in lines.columns
    assert lines.where("`lines.val.gift_wrap` IS NOT NULL").count() == sum(
        len(d["lines"]) for d in documents_of(landing) if d["order_id"].startswith("00003"))
    assert_documents_exactly_once(spark, landing, lake)
    assert deltamark(*run).exit_code == 0  # nothing new: nothing written
    assert_documents_exactly_once(spark, landing, lake)


def test_order_documents_recover_after_a_crash_between_tables(spark, tmp_path):
    landing, lake, state = tmp_path / "landing", tmp_path / "lake", tmp_path / "state"
    args = ["--state-root", str(state), "run", "order_documents", "--arg",
            f"landing={landing}", "--arg", f"lake={lake}"]
    order_documents_landing.land(landing, batches=1, orders=40)
    assert deltamark(*args).exit_code == 0
    order_documents_landing.land(landing, batches=1, orders=40)
    crashed = subprocess.run(
        [sys.executable, "-m", "framework", "--conf-dir", CONF, *args],
        env={**os.environ, "DELTAMARK_CRASH_AT": "target_committed:2"},
        capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    order_documents_landing.land(landing, batches=1, orders=40)
    recovered = deltamark(*args)
    assert "replayed" in recovered.stdout, recovered.output
    assert_documents_exactly_once(spark, landing, lake)


def test_customers_cdc_applies_dms_files_late_repeated_and_after_a_kill(spark, tmp_path):
    landing, state = tmp_path / "landing", str(tmp_path / "state-scd")
    source = customers_dms_landing.Source(landing)

    def run(scd_type: int, *extra: str, env: dict | None = None):
        args = ["--state-root", f"{state}{scd_type}", "run", "customers_cdc", "--arg",
                f"landing={landing}", "--arg",
                f"target={tmp_path / f'scd{scd_type}'}", "--arg", f"scd_type={scd_type}", *extra]
        if env is None:
            return deltamark(*args)
        return subprocess.run([sys.executable, "-m", "framework", "--conf-dir", CONF, *args],
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=300)

    source.full_load(30)
    source.change_file(40, seed=1)
    for scd_type in (1, 2):
        assert run(scd_type).exit_code == 0
    held_back = source.change_file(40, seed=2)  # delivered late: older than the next
    hidden = held_back.rename(tmp_path / held_back.name)
    newer = source.change_file(40, seed=3)
    for scd_type in (1, 2):
        assert run(scd_type).exit_code == 0
    hidden.rename(held_back)
    (landing / f"copy-{newer.name}").write_bytes(newer.read_bytes())  # sent twice
    crashed = run(1, env={"DELTAMARK_CRASH_AT": "tombstones_recorded"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    for scd_type in (1, 2):
        result = run(scd_type)
        assert result.exit_code == 0, result.output

    engine = delta_engine(spark, mode="embedded")
    scd1 = str(tmp_path / "scd1")
    current = {(r.id, r.email, r.tier) for r in engine.read(scd1).collect()}
    assert current == {(k, r["email"], r["tier"]) for k, r in source.rows.items()}
    # back to the end of the first run, the table too; the runs after it again
    first = log.history(scd1)[-1].user_metadata["deltamark"]["run_id"]
    rewound = deltamark("--state-root", f"{state}1", "bookmarks", "rewind", "customers_cdc",
                        "--to-run", first, "--restore-targets")
    assert rewound.exit_code == 0, rewound.output
    assert {(r.id, r.email, r.tier) for r in engine.read(scd1).collect()} != current
    assert run(1).exit_code == 0
    assert {(r.id, r.email, r.tier) for r in engine.read(scd1).collect()} == current
    history = {(r.id, r.email, r["__START_AT"], r["__END_AT"])
               for r in engine.read(str(tmp_path / "scd2")).collect()}
    assert history == customers_dms_landing.history(source.changes)


def test_customers_mirror_applies_a_delta_change_feed(spark, tmp_path):
    upstream, target = str(tmp_path / "upstream"), str(tmp_path / "mirror")
    run = ["--state-root", str(tmp_path / "state"), "run", "customers_mirror",
           "--arg", f"source={upstream}", "--arg", f"target={target}"]
    (spark.createDataFrame([(1, "a@x"), (2, "b@x"), (3, "c@x")], "id INT, email STRING")
     .write.format("delta").option("delta.enableChangeDataFeed", "true").save(upstream))
    assert deltamark(*run).exit_code == 0
    for change in ("UPDATE {t} SET email = 'a2@x' WHERE id = 1",
                   "DELETE FROM {t} WHERE id = 2", "INSERT INTO {t} VALUES (4, 'd@x')",
                   "UPDATE {t} SET email = 'a3@x' WHERE id = 1",
                   "MERGE INTO {t} t USING (SELECT 3 AS id) s ON t.id = s.id "
                   "WHEN MATCHED THEN DELETE"):
        spark.sql(change.format(t=f"delta.`{upstream}`"))
    second = deltamark(*run)
    assert second.exit_code == 0, second.output
    mirror = {tuple(r) for r in spark.read.format("delta").load(target).collect()}
    assert mirror == {(1, "a3@x", 4), (4, "d@x", 3)}  # as of the upstream versions
    for change in ("INSERT INTO {t} VALUES (2, 'b2@x'), (5, 'e@x')",
                   "UPDATE {t} SET email = 'd2@x' WHERE id = 4", "DELETE FROM {t} WHERE id = 1",
                   "UPDATE {t} SET email = 'd3@x' WHERE id = 4"):
        spark.sql(change.format(t=f"delta.`{upstream}`"))
    # killed once the mirror's commit landed, before the state's: the next run finds it
    crashed = subprocess.run([sys.executable, "-m", "framework", "--conf-dir", CONF, *run],
                             env={**os.environ, "DELTAMARK_CRASH_AT": "target_committed"},
                             capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    recovered = deltamark(*run)
    assert recovered.exit_code == 0, recovered.output
    assert "replayed" in recovered.stdout, recovered.output
    mirror = spark.read.format("delta").load(target)
    assert sorted(mirror.drop("_commit_version").collect()) == sorted(
        spark.read.format("delta").load(upstream).collect())
    assert len(log.history(target)) == 3  # created, then one commit per run: none twice


@pytest.mark.spark  # starts Spark in a process of its own
def test_a_run_on_a_terminal_shows_spark_s_progress(tmp_path):
    """On a terminal (a pty here), the log lines scroll above a live line of Spark's
    stages and tasks."""
    import pty

    landing = tmp_path / "landing"
    orders_landing.land(landing, batches=3, orders=50)
    command = [sys.executable, "-m", "framework", "--state-root", str(tmp_path / "state"),
               "run", "orders_ingest", "--arg", f"landing={landing}", "--arg",
               f"target={tmp_path / 'bronze'}"]
    primary, secondary = pty.openpty()
    process = subprocess.Popen(command,
                               stdin=secondary, stdout=secondary, stderr=secondary,
                               cwd=ROOT, env={**os.environ, "COLUMNS": "160"})
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the run ended: its side of the pty is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert process.wait(timeout=60) == 0, shown.decode(errors="replace")[-3000:]
    raw = shown.decode(errors="replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)  # without the terminal's codes
    assert "\x1b[" in raw and "orders_src: 3 of 3 files to read" in text
    assert "Spark: stage" in text and "tasks done" in text
    # in a pipe the same lines are plain: tests/test_docs.py's README runs check it
