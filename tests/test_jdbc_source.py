"""Database sources over JDBC, on a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import signal

import pytest
from databases import sqlite_database
from typer.testing import CliRunner

from framework.cli import app
from framework.errors import ConfigError, DatabaseError, JobFailedError
from framework.jdbc import Connection, resolve_connection
from framework.sources import jdbc

T = "2026-11-20 10:{:02}:00"  # minutes -> a timestamp both databases take


def declare(ws, db, cls="TableCopy", **params):
    ws.connect(db)
    ws.declare("copy", cls=cls, connection="db", **params)


def target(ws, *columns: str, table: str | None = None) -> list[tuple]:
    from framework.delta import delta_engine

    df = delta_engine(ws.spark, mode="embedded").read(table or ws.target)
    return sorted(tuple(r) for r in df.select(*columns).collect())


def state(ws, context: str = "db") -> dict:
    return ws.store.histories("copy", context=context)[context].current.state


def rows_read(report, context: str = "db") -> int:
    """The rows the run read (none when it was skipped: nothing new)."""
    return 0 if report.status == "skipped" else report.inputs[context]["rows"]


def test_the_primary_key_is_the_default_bookmark(ws, database):
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)",
                     "INSERT INTO orders VALUES (?, ?)", rows=[(i, i * 10) for i in range(1, 6)])
    declare(ws, database, table="orders")
    assert rows_read(ws.run()) == 5
    database.execute("INSERT INTO orders VALUES (?, ?)", rows=[(i, i * 10) for i in range(6, 9)])
    assert rows_read(ws.run()) == 3
    assert rows_read(ws.run()) == 0
    assert target(ws, "id", "amount") == [(i, i * 10) for i in range(1, 9)]
    assert state(ws)["keys"] == ["id"] and state(ws)["position"]["values"] == ["8"]


def test_rows_sharing_the_boundary_key_are_neither_lost_nor_read_twice(ws, database):
    database.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
                     "INSERT INTO events VALUES (?, ?)",
                     rows=[(1, T.format(0)), (2, T.format(0)), (3, T.format(1)), (4, T.format(1))])
    declare(ws, database, table="events", keys="ts")
    assert rows_read(ws.run()) == 4
    assert state(ws)["position"]["boundary"] == [["3"], ["4"]]
    # a late row at the boundary's key value, and a newer one
    database.execute("INSERT INTO events VALUES (?, ?)", rows=[(5, T.format(1)), (6, T.format(2))])
    assert rows_read(ws.run()) == 2
    database.execute("INSERT INTO events VALUES (?, ?)", rows=[(7, T.format(2))])
    assert rows_read(ws.run()) == 1
    assert rows_read(ws.run()) == 0
    assert target(ws, "id") == [(i,) for i in range(1, 8)]
    shown = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "bookmarks", "show", "copy"])
    assert f"processed up to : ts = {T.format(2)} (the next run reads the rows after it)" \
        in shown.output
    assert "at that value   : 2 rows read, by id; others at it are read next" in shown.output


def test_a_new_context_starts_at_its_initial_value_drains_a_cap_and_backfills_apart(
        ws, database):
    database.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
                     "INSERT INTO events VALUES (?, ?)",
                     rows=[(i, T.format(i // 2)) for i in range(1, 21)])  # ts in pairs
    declare(ws, database, table="events", keys="ts", initial_value=T.format(5),
            bounded_rows="4")
    runs = [ws.run().inputs["db"] for _ in range(3)]
    assert runs == [{"rows": 4, "backlog": 7}, {"rows": 4, "backlog": 3}, {"rows": 3}]
    assert rows_read(ws.run()) == 0
    assert target(ws, "id") == [(i,) for i in range(10, 21)]
    position = state(ws)["position"]

    declare(ws, database, table="events", keys="ts", initial_value=T.format(0),
            end_value=T.format(5))  # the rows before the first run's start, apart
    assert rows_read(ws.run()) == 9
    assert state(ws)["position"] == position
    declare(ws, database, table="events", keys="ts", initial_value=T.format(5),
            bounded_rows="4")
    assert rows_read(ws.run()) == 0
    assert target(ws, "id") == [(i,) for i in range(1, 21)]

    database.execute("INSERT INTO events VALUES (?, ?)",
                     rows=[(21, T.format(10)), (22, T.format(11)), (23, T.format(12)),
                           (24, T.format(12))])
    cli = CliRunner()
    said = cli.invoke(app, ["--conf-dir", str(ws.conf), "bookmarks", "set", "copy", "--ctx",
                            "db", "--value", T.format(11)])
    assert said.exit_code == 0 and f"set db: ts = {T.format(11)} of " in said.output
    assert rows_read(ws.run()) == 2  # as if rows up to ts 11 had been read: 23 and 24
    said = cli.invoke(app, ["--conf-dir", str(ws.conf), "bookmarks", "set", "copy", "--ctx",
                            "db", "--value", "1", "--value", "2"])
    assert said.exit_code == 1 and "give one value per bookmark key of db (ts)" in said.output

    for params, said in [({"end_value": T.format(5)}, "end_value needs initial_value"),
                         ({"bounded_rows": "0"}, "bounded_rows must be a positive integer")]:
        declare(ws, database, table="events", keys="ts", **params)
        with pytest.raises(JobFailedError, match=said):
            ws.run()


def test_rows_inserted_during_a_run_wait_for_the_next_run(ws, database):
    database.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
                     "INSERT INTO events VALUES (?, ?)", rows=[(1, T.format(0)), (2, T.format(1))])
    during = f"INSERT INTO events VALUES (3, '{T.format(1)}'), (4, '{T.format(5)}')"
    declare(ws, database, table="events", keys="ts", insert_during_run=during,
            db_kind=database.kind, db_dsn=database.dsn)
    ws.run()
    assert target(ws, "id") == [(1,), (2,)]  # 3 shares the pinned end's key value, 4 is past it
    declare(ws, database, table="events", keys="ts")
    assert rows_read(ws.run()) == 2
    assert target(ws, "id") == [(i,) for i in range(1, 5)]


@pytest.mark.compat
def test_an_updated_at_key_with_lookback_merges_updates_and_late_rows(ws, database):
    database.execute(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(20), "
        "updated_at TIMESTAMP NOT NULL)",
        "INSERT INTO customers VALUES (?, ?, ?)",
        rows=[(1, "ann", T.format(0)), (2, "bob", T.format(1)), (3, "cy", T.format(2))])
    declare(ws, database, table="customers", keys="updated_at", lookback_s="600",
            merge_on="id")
    ws.run()
    database.execute(f"UPDATE customers SET name = 'bobby', updated_at = '{T.format(5)}' "
                     "WHERE id = 2", f"INSERT INTO customers VALUES (4, 'dee', '{T.format(6)}')")
    ws.run()
    assert target(ws, "id", "name") == [(1, "ann"), (2, "bobby"), (3, "cy"), (4, "dee")]
    # committed late: its key is before the bookmark (10:06) but within the lookback
    database.execute(f"INSERT INTO customers VALUES (5, 'eve', '{T.format(3)}')")
    ws.run()
    ws.run()  # the lookback window is read again: merged, not duplicated
    assert target(ws, "id", "name") == [(1, "ann"), (2, "bobby"), (3, "cy"), (4, "dee"),
                                         (5, "eve")]


def test_rows_read_again_by_a_lookback_are_never_appended(ws, tmp_path):
    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
               "INSERT INTO t VALUES (1, 1)")
    declare(ws, db, table="t", keys="n", lookback="5")
    with pytest.raises(JobFailedError, match=r"would duplicate them.*mode='merge'"):
        ws.run()
    assert not os.path.exists(ws.target)


@pytest.mark.parametrize("keys", ["", "batch,seq"])
def test_compound_keys(ws, database, keys):
    database.execute(
        "CREATE TABLE lines (batch INTEGER NOT NULL, seq INTEGER NOT NULL, "
        "PRIMARY KEY (batch, seq))",
        "INSERT INTO lines VALUES (?, ?)", rows=[(1, 1), (1, 2), (2, 1)])
    declare(ws, database, table="lines", keys=keys)
    assert rows_read(ws.run()) == 3
    assert state(ws)["keys"] == ["batch", "seq"]
    database.execute("INSERT INTO lines VALUES (?, ?)", rows=[(2, 2), (2, 3), (3, 1)])
    assert rows_read(ws.run()) == 3
    assert target(ws, "batch", "seq") == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 1)]


def test_descending_keys(ws, database):
    database.execute("CREATE TABLE countdown (n INTEGER PRIMARY KEY, label VARCHAR(10))",
                     "INSERT INTO countdown VALUES (?, ?)",
                     rows=[(100, "a"), (99, "b"), (98, "c")])
    declare(ws, database, table="countdown", order="desc")
    assert rows_read(ws.run()) == 3
    database.execute("INSERT INTO countdown VALUES (?, ?)", rows=[(97, "d"), (96, "e")])
    assert rows_read(ws.run()) == 2
    assert rows_read(ws.run()) == 0
    assert target(ws, "n") == [(n,) for n in range(96, 101)]
    assert state(ws)["position"]["values"] == ["96"]


def test_a_query_source_needs_keys_and_reads_incrementally(ws, tmp_path):
    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, kind TEXT)",
               "INSERT INTO t VALUES (?, ?)", rows=[(1, "a"), (2, "b"), (3, "a")])
    declare(ws, db, query="SELECT id, kind FROM t WHERE kind = 'a'", keys="id")
    assert rows_read(ws.run()) == 2
    db.execute("INSERT INTO t VALUES (?, ?)", rows=[(4, "a"), (5, "b")])
    assert rows_read(ws.run()) == 1
    assert target(ws, "id") == [(1,), (3,), (4,)]


def test_a_query_ending_in_a_comment_or_a_semicolon_is_read(ws, database):
    database.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, v INTEGER)",
                     "INSERT INTO q VALUES (?, ?)", rows=[(1, 10), (2, 20)])
    declare(ws, database, query="SELECT id, v FROM q -- every row\n;\n", keys="id")
    assert rows_read(ws.run()) == 2
    database.execute("INSERT INTO q VALUES (?, ?)", rows=[(3, 30)])
    assert rows_read(ws.run()) == 1
    assert target(ws, "id", "v") == [(1, 10), (2, 20), (3, 30)]


def test_parallel_reads_split_the_planned_rows(spark, database, monkeypatch):
    database.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, v INTEGER)",
                     "INSERT INTO big VALUES (?, ?)", rows=[(i, i % 7) for i in range(1, 1001)])
    connection = Connection(database.url, user=database.user, password=database.password)
    source = jdbc.JdbcSource(connection=connection, table="big", num_partitions=4)
    first = jdbc.plan_jdbc(spark, source, start=None, advance=True)
    assert first.partitioning == ("id", "1", "1000", 4) and first.rows == 1000
    df = jdbc.read_jdbc(spark, source, first)
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.id for r in df.collect()) == list(range(1, 1001))
    database.execute("INSERT INTO big VALUES (?, ?)", rows=[(i, 0) for i in range(1001, 1101)])
    second = jdbc.plan_jdbc(spark, source, start=first.state(), advance=True)
    assert second.partitioning == ("id", "1001", "1100", 4) and second.rows == 100
    assert jdbc.read_jdbc(spark, source, second).count() == 100
    # without options: one partition per AUTO_PARTITION_ROWS, up to the session's cores
    unasked = jdbc.JdbcSource(connection=connection, table="big")
    assert jdbc.plan_jdbc(spark, unasked, start=None, advance=True).partitioning is None
    monkeypatch.setattr(jdbc, "AUTO_PARTITION_ROWS", 100)
    auto = jdbc.plan_jdbc(spark, unasked, start=None, advance=True)
    assert auto.partitioning == ("id", "1", "1100", spark.sparkContext.defaultParallelism)
    assert jdbc.read_jdbc(spark, unasked, auto).count() == 1100


def test_a_replay_after_a_crash_reads_exactly_the_pinned_rows(ws, tmp_path):
    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)",
               "INSERT INTO orders VALUES (?, ?)", rows=[(i, i) for i in range(1, 6)])
    archive = str(ws.root / "lake" / "archive")
    declare(ws, db, cls="TableToTwoTargets", table="orders", archive=archive)
    process = ws.start_run("copy", DELTAMARK_CRASH_AT="target_committed:1")
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err[-2000:]
    db.execute("INSERT INTO orders VALUES (?, ?)", rows=[(i, i) for i in range(6, 9)])
    report = ws.run()
    assert report.recovered.action == "replayed"
    assert rows_read(report) == 3  # the new run reads only what came after the pinned plan
    for table in (ws.target, archive):
        assert target(ws, "id", table=table) == [(i,) for i in range(1, 9)]


def test_bad_sources_fail_with_a_clear_message(ws, tmp_path):
    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE nopk (a INTEGER)", "CREATE TABLE t (id INTEGER PRIMARY KEY)")
    cases = [({"table": "nopk"}, "has no primary key: give keys"),
             ({"table": "t", "keys": "nope"}, "has no column 'nope' \\(columns: id\\)"),
             ({"table": "missing"}, "no such table: missing"),
             ({"table": "t", "order": "up"}, "sort order must be asc or desc")]
    for params, message in cases:
        declare(ws, db, **params)
        with pytest.raises(JobFailedError, match=message) as caught:
            ws.run()
        assert "source db:" in str(caught.value.cause)
    declare(ws, db, table="t")
    ws.run()
    declare(ws, db, table="t", keys="id", order="desc")
    with pytest.raises(JobFailedError, match=r"bookmark was taken over keys \['id'\] \(asc\)"):
        ws.run()


def test_a_missing_driver_names_spark_jars(spark):
    connection = Connection("jdbc:h2:mem:x")
    with pytest.raises(DatabaseError, match=r"org.h2.Driver is not on the Spark session: list "
                                            "its jar in spark.conf spark.jars"):
        jdbc.plan_jdbc(spark, jdbc.JdbcSource(connection=connection, table="t"), start=None,
                       advance=False)


def test_credentials_come_from_the_environment_and_never_show(ws, pg_server):
    db = pg_server.database()
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)", "INSERT INTO orders VALUES (1)")
    declare(ws, db, table="orders")
    conf_text = (ws.conf / "deltamark.yaml").read_text()
    assert db.password not in conf_text and "${DELTAMARK_TEST_DB_PASSWORD}" in conf_text

    process = ws.start_run("copy", DELTAMARK_TEST_DB_PASSWORD=db.password)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-2000:]
    assert db.password not in out + err
    recorded = json.dumps([vars(r) for r in ws.store.runs("copy")] +
                          [vars(b) for b in ws.store.bookmarks("copy")], default=str)
    assert db.password not in recorded and "127.0.0.1" in recorded

    wrong = "not-" + db.password
    process = ws.start_run("copy", DELTAMARK_TEST_DB_PASSWORD=wrong)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert 'password authentication failed for user "deltamark"' in err
    assert wrong not in out + err and db.password not in out + err

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DELTAMARK_TEST_DB_PASSWORD")
        with pytest.raises(JobFailedError, match=r"connections.db.password: environment "
                                                 "variable DELTAMARK_TEST_DB_PASSWORD is not set"):
            ws.run()


def test_connections_mask_credentials_and_resolve_from_conf(monkeypatch):
    assert Connection("jdbc:postgresql://h/db?user=u&password=s3cret").display == \
        "jdbc:postgresql://h/db?user=u&password=***"
    assert Connection("jdbc:mysql://u:s3cret@h/db").display == "jdbc:mysql://u:***@h/db"
    assert "s3cret" not in repr(Connection("jdbc:sqlite:x", user="u", password="s3cret"))
    monkeypatch.setenv("SHOP_PASSWORD", "pw")
    configured = {"shop": {"url": "jdbc:postgresql://h/shop", "user": "etl",
                           "password": "${SHOP_PASSWORD}", "properties": {"ssl": True}}}
    shop = resolve_connection("shop", configured, conf_file="conf/deltamark.yaml")
    assert (shop.user, shop.password, shop.jdbc_properties()["ssl"]) == ("etl", "pw", "true")
    with pytest.raises(ConfigError, match="no connection 'crm' \\(known: shop\\)"):
        resolve_connection("crm", configured, conf_file="conf/deltamark.yaml")


def test_pause_between_two_runs_reads_the_rows_between_them(ws, tmp_path):
    db = sqlite_database(tmp_path)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (?)",
               rows=[(i,) for i in range(1, 4)])
    declare(ws, db, table="t")
    first = ws.run()
    db.execute("INSERT INTO t VALUES (?)", rows=[(4,), (5,)])
    second = ws.run()
    db.execute("INSERT INTO t VALUES (6)")
    paused = ws.run(bookmark="pause", bookmark_from=first.run_id, bookmark_to=second.run_id)
    assert rows_read(paused) == 2
    assert rows_read(ws.run()) == 1  # the bookmark stayed at run 2


def test_a_password_in_a_connection_url_is_masked_in_errors(ws):
    url = "jdbc:postgresql://127.0.0.1:1/shop?user=etl&password=s3cret"
    ws.declare("copy", cls="TableCopy", connection=url, table="t", ctx="")
    with pytest.raises(JobFailedError, match="is read without transformation_ctx") as caught:
        ws.run()
    assert "password=***" in str(caught.value) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize("url", [
    "jdbc:postgresql://etl:{pw}@127.0.0.1:{port}/shop",  # credentials PgJDBC cannot parse
    "jdbc:postgresql://127.0.0.1:notaport/shop?user=etl&password={pw}",
])
def test_a_secret_in_a_url_never_reaches_output_or_state(ws, pg_server, url):
    """Whatever the driver echoes: every output and every state file is searched."""
    db = pg_server.database()
    secret = "s3cret-" + os.urandom(4).hex()
    ws.connect(db)
    ws.declare("copy", cls="TableCopy", connection=url.format(pw=secret, port=pg_server.port),
               table="orders")
    process = ws.start_run("copy")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1 and "error: job copy" in err
    listed = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "runs", "list", "--json"])
    [run] = json.loads(listed.stdout)
    assert run["status"] == "failed" and "***" in run["arguments"]["connection"]
    stored = b"".join(p.read_bytes() for p in (ws.root / "state").rglob("*") if p.is_file())
    assert secret.encode() not in stored
    assert secret not in out + err + listed.output


def test_the_python_client_answers_as_the_jdbc_one(database):
    """What Spark Connect runs deltamark's queries with (framework.jdbc.dbapi): columns
    typed as java.sql.Types, values as the database's text, the primary key in key order,
    statements with ? parameters committed together or not at all."""
    from framework.jdbc.dbapi import python_database

    database.execute("CREATE TABLE t (b INTEGER NOT NULL, a VARCHAR(20) NOT NULL, "
                     "amount DECIMAL(10, 2), at TIMESTAMP, PRIMARY KEY (a, b))",
                     "INSERT INTO t VALUES (?, ?, ?, ?)",
                     rows=[(1, "x", 9.5, "2026-11-20 10:00:00")])
    connection = Connection(database.url, database.user, database.password)
    with python_database(connection, why="here") as db:
        assert [(c.name, c.jdbc_type) for c in db.columns("t")] == [
            ("b", 4), ("a", 12), ("amount", 3 if database.kind == "sqlite" else 2),
            ("at", 93)]
        assert db.primary_key("t") == ("a", "b")
        [(b, a, at)] = db.rows("SELECT b, a, at FROM t")
        assert (b, a, at) == ("1", "x", "2026-11-20 10:00:00")
        with pytest.raises(DatabaseError, match=r"\(in: INSERT INTO t"), \
                db.transaction() as tx:
            assert tx.update("UPDATE t SET b = ? WHERE a = ?", 2, "x") == 1
            tx.update("INSERT INTO t VALUES (?, ?, NULL, NULL)", 2, "x")  # a duplicate
        assert db.rows("SELECT b FROM t") == [("1",)]  # the update was rolled back
