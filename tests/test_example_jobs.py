"""The example job and the demo's steps, through the CLI as a user runs them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from databases import require_jar
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine
from jobs import customers_source, orders_landing

pytestmark = pytest.mark.spark

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

    bronze = delta_engine(spark, "embedded").read(target)
    assert bronze.count() == 250 and bronze.select("order_id").distinct().count() == 250
    per_run = {r.loaded_by_run: r["count"] for r in bronze.groupBy("loaded_by_run").count()
               .collect()}
    assert per_run == {1: 150, 2: 100}

    shown = deltamark("--state-root", state, "bookmarks", "show", "orders_ingest", "--files")
    assert "orders_ingest / orders_src  (files; commit by run 2" in shown.stdout
    assert "totals          : 5 files" in shown.stdout
    assert shown.stdout.count("batch-0000") == 5

    listed = deltamark("--state-root", state, "runs", "list", "orders_ingest")
    assert "orders_src: 3 files" in listed.stdout and "orders_src: 2 files" in listed.stdout


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
    copied = delta_engine(spark, "embedded").read(target).select("id", "name", "country")
    assert sorted(tuple(r) for r in copied.collect()) == source
