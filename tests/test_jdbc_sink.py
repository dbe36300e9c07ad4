"""Database targets on a real PostgreSQL server: a Glue script's JDBC sink appends each
run's rows exactly once, whatever crashes, and a replay or a later run finds the marks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from framework.cli import app
from framework.common.faults import CRASH_ENV

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''\
import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from awsglue.context import GlueContext
from awsglue.job import Job

args = getResolvedOptions(sys.argv, ["JOB_NAME", "source", "lake"])
glueContext = GlueContext(SparkContext())
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
orders = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args["source"]]}, format="json",
    transformation_ctx="orders")
mapped = ApplyMapping.apply(frame=orders, mappings=[
    ("id", "long", "order_id", "long"), ("amount", "double", "amount", "double")])
glueContext.write_dynamic_frame.from_options(
    frame=mapped, connection_type="s3", format="glueparquet",
    connection_options={"path": args["lake"]})
glueContext.write_dynamic_frame.from_jdbc_conf(
    frame=mapped, catalog_connection="warehouse",
    connection_options={"dbtable": "sales.orders", "database": DATABASE})
job.commit()
'''


@pytest.fixture
def project(pg_server, tmp_path, monkeypatch):
    from databases import available_jars

    db = pg_server.database()
    db.execute("CREATE SCHEMA sales")
    conf, source = tmp_path / "conf", tmp_path / "in"
    conf.mkdir()
    source.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"),
        # the connection names another database of the server: from_jdbc_conf switches
        "connections": {"warehouse": {"url": db.url.rsplit("/", 1)[0] + "/postgres",
                                      "user": db.user, "password": "${PG_PASSWORD}"}},
        "spark": {"conf": {"spark.jars": ",".join(available_jars())}}}))
    script = tmp_path / "to_postgres.py"
    script.write_text(SCRIPT.replace("DATABASE", repr(db.url.rsplit("/", 1)[1])))
    monkeypatch.setenv("PG_PASSWORD", db.password)
    return db, conf, source, script, tmp_path / "lake"


def arguments(project) -> list[str]:
    _, conf, source, script, lake = project
    return ["--conf-dir", str(conf), "run", "--script", str(script), "--arg",
            "JOB_NAME=to_postgres", "--arg", "job-bookmark-option=job-bookmark-enable",
            "--arg", f"source={source}", "--arg", f"lake={lake}"]


def run(project) -> dict:
    result = CliRunner().invoke(app, [*arguments(project), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def crash(project, point: str) -> None:
    env = {**os.environ, CRASH_ENV: point, "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-m", "framework", *arguments(project)],
                             env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == -signal.SIGKILL, (point, process.returncode,
                                                   process.stderr[-2000:])


def land(project, name: str, *ids: int) -> None:
    _, _, source, _, _ = project
    (source / name).write_text("\n".join(json.dumps({"id": i, "amount": i * 1.5})
                                         for i in ids))


def database_rows(db) -> list[tuple]:
    return sorted(db.query("SELECT order_id, amount FROM sales.orders"))


@pytest.mark.compat
def test_a_database_sink_appends_each_run_once_through_crashes(spark, project):
    db = project[0]
    land(project, "1.json", 1, 2)
    first = run(project)
    assert first["outputs"]["jdbc://warehouse/sales.orders"]["rows"] == 2
    assert database_rows(db) == [(1, 1.5), (2, 3.0)]
    assert run(project)["status"] == "skipped"  # nothing new

    # killed with the rows staged: the Parquet target had landed, so the run is replayed
    land(project, "2.json", 3)
    crash(project, "staged:2")
    assert database_rows(db) == [(1, 1.5), (2, 3.0)]
    replayed = run(project)
    assert replayed["recovered"]["action"] == "replayed"
    assert database_rows(db) == [(1, 1.5), (2, 3.0), (3, 4.5)]

    # killed after the rows landed, before the run was recorded: the replay finds the mark
    land(project, "3.json", 4, 5)
    crash(project, "target_committed:2")
    assert run(project)["recovered"]["action"] == "replayed"
    expected = [(i, i * 1.5) for i in range(1, 6)]
    assert database_rows(db) == expected
    assert sorted(r.order_id for r in spark.read.parquet(str(project[4])).collect()) == \
        [1, 2, 3, 4, 5]
    marks = db.query("SELECT run_seq, row_count FROM sales.deltamark_commits ORDER BY run_seq")
    assert [rows for _, rows in marks] == [2, 1, 2]
    assert db.query("SELECT table_name FROM information_schema.tables WHERE table_name "
                    "LIKE 'deltamark_stage_%'") == []  # no staging table left

    # a rewind cannot take rows back from a database table: it says so, and changes nothing
    _, conf, *_ = project
    result = CliRunner().invoke(app, ["--conf-dir", str(conf), "bookmarks", "rewind",
                                      "to_postgres", "--to-run", first["run_id"],
                                      "--restore-targets"])
    assert result.exit_code == 1
    assert "jdbc://warehouse/sales.orders is a database table" in result.output
    assert database_rows(db) == expected


# shaped like the legislators data the sample was written for (its README prints the
# schemas): persons and organizations share links, image, identifiers, other_names, id and
# name; the sample drops or renames four of them, and joins on the rest (links, image): the
# parties have them, the legislatures the memberships name do not
PERSONS = [
    {"id": "p1", "name": "Ann Lee", "family_name": "Lee", "given_name": "Ann",
     "sort_name": "Lee, Ann", "gender": "female", "birth_date": "1950-01-02",
     "image": "https://example.org/ann.jpg", "images": [{"url": "https://example.org/a.jpg"}],
     "links": [{"note": "Wikipedia", "url": "https://en.wikipedia.org/wiki/Ann"}],
     "identifiers": [{"scheme": "bioguide", "identifier": "L0001"}],
     "contact_details": [{"type": "twitter", "value": "@ann"}],
     "other_names": [{"note": "nick", "name": "Annie", "lang": "en"},
                     {"name": "Ana", "lang": "es"}]},
    {"id": "p2", "name": "Bo Chan", "family_name": "Chan", "given_name": "Bo",
     "sort_name": "Chan, Bo", "gender": "male", "death_date": "2001-05-06",
     "identifiers": [], "contact_details": [], "other_names": []}]
MEMBERSHIPS = [{"person_id": "p1", "organization_id": "o1", "on_behalf_of_id": "party/d",
                "role": "member", "area_id": "ocd/ny", "legislative_period_id": "term/1",
                "start_date": "2001-01-03"},
               {"person_id": "p2", "organization_id": "o2", "on_behalf_of_id": "party/r",
                "role": "member", "area_id": "ocd/ca", "legislative_period_id": "term/1",
                "end_date": "2003-01-03"}]
ORGANIZATIONS = [{"id": "o1", "name": "House", "classification": "legislature",
                  "type": "lower house", "seats": 435,
                  "other_names": [{"name": "Lower"}], "identifiers": [{"scheme": "x"}]},
                 {"id": "o2", "name": "Senate", "classification": "legislature",
                  "type": "upper house", "seats": 100, "other_names": [], "identifiers": []},
                 {"id": "party/d", "name": "Democrat", "classification": "party",
                  "image": "https://example.org/d.svg",
                  "links": [{"note": "website", "url": "https://example.org/d"}],
                  "identifiers": [{"scheme": "wikidata", "identifier": "Q29552"}],
                  "other_names": [{"lang": "en", "note": "multilingual", "name": "Dem"}]}]


def legislators_conf(tmp_path, memberships, settings=None) -> Path:
    """A conf directory whose catalog has the legislators tables (``PERSONS``,
    ``memberships``, ``ORGANIZATIONS``) as JSON files, with ``settings`` beside it."""
    catalog = {}
    for table, rows in [("persons_json", PERSONS), ("memberships_json", memberships),
                        ("organizations_json", ORGANIZATIONS)]:
        (tmp_path / table).mkdir()
        (tmp_path / table / "part.json").write_text("\n".join(map(json.dumps, rows)))
        catalog[f"legislators.{table}"] = {"location": str(tmp_path / table), "format": "json"}
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(tmp_path / "state"), "catalog": catalog, **(settings or {})}))
    return conf


def test_aws_glue_samples_join_and_relationalize_writes_its_tables_to_postgresql(
        spark, pg_server, tmp_path):
    """aws-glue-samples' join_and_relationalize.py, as published but for its data
    locations: its Redshift sink (from_jdbc_conf to connection redshift3, database testdb)
    writes the relationalized tables to PostgreSQL."""
    import psycopg
    from databases import available_jars

    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS testdb")
        conn.execute("CREATE DATABASE testdb")
    conf = legislators_conf(tmp_path, MEMBERSHIPS, {
        "connections": {"redshift3": {"url": f"jdbc:postgresql://127.0.0.1:{pg_server.port}/"
                                              "postgres", "user": pg_server.user,
                                       "password": pg_server.password}},
        "spark": {"conf": {"spark.jars": ",".join(available_jars())}}})
    script = tmp_path / "join_and_relationalize.py"
    text = (Path(__file__).with_name("glue_scripts") / script.name).read_text()
    script.write_text(text.replace("s3://glue-sample-target/", f"{tmp_path}/"))

    result = CliRunner().invoke(app, ["--conf-dir", str(conf), "run", "--script",
                                      str(script), "--arg", "JOB_NAME=legislators"])
    assert result.exit_code == 0, result.output

    def query(sql):
        with psycopg.connect(pg_server.dsn("testdb")) as conn:
            return sorted(conn.execute(sql).fetchall())

    assert query("SELECT name, org_name, on_behalf_of_id FROM hist_root") == [
        ("Ann Lee", "House", "party/d"), ("Bo Chan", "Senate", "party/r")]
    # the child tables join back on Relationalize's keys (deterministic in deltamark)
    assert query('SELECT r.name, c."contact_details.val.value" FROM hist_root r JOIN '
                 "hist_root_contact_details c ON c.id = r.contact_details") == [
        ("Ann Lee", "@ann")]
    assert query('SELECT r.name, o."other_names.val.name" FROM hist_root r JOIN '
                 "hist_root_other_names o ON o.id = r.other_names") == [
        ("Ann Lee", "Ana"), ("Ann Lee", "Annie")]
    assert query("SELECT target_table, row_count FROM deltamark_commits") == [
        ("hist_root", 2), ("hist_root_contact_details", 1), ("hist_root_identifiers", 1),
        ("hist_root_images", 1), ("hist_root_links", 1), ("hist_root_other_names", 2)]
    history = spark.read.parquet(str(tmp_path / "output-dir" / "legislator_history"))
    assert sorted(r.name for r in history.collect()) == ["Ann Lee", "Bo Chan"]
    # each field once, as the sample's README prints l_history: the organizations joined
    # have no links or image, so the persons' keep their names
    assert sorted(history.columns) == sorted(
        ["role", "seats", "org_name", "links", "type", "sort_name", "area_id", "images",
         "on_behalf_of_id", "other_names", "contact_details", "name", "birth_date",
         "organization_id", "gender", "classification", "death_date", "legislative_period_id",
         "identifiers", "image", "given_name", "family_name", "id", "start_date", "end_date"])
    assert sorted((r.name, r.image, r.seats) for r in history.collect()) == [
        ("Ann Lee", "https://example.org/ann.jpg", 435), ("Bo Chan", None, 100)]
