"""Shared fixtures: one local SparkSession per test session, Delta engines on both paths."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from framework.config import Settings, SparkSettings

#: A test using one of these fixtures (directly or through another) starts Spark: it gets
#: the ``spark`` marker, so ``pytest -m "not spark"`` is the fast subset. A test that starts
#: Spark in a process of its own says so with ``@pytest.mark.spark``.
SPARK_FIXTURES = frozenset({"spark", "cluster", "connect_server", "kept_server",
                            "demo"})  # tests/test_ui.py's: the demo's workflow runs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server for the whole session (or why there is none), named by the AWS
    environment variables before the Spark JVM starts: the JVM takes its environment then."""
    from s3 import S3Server

    try:
        server = S3Server()
    except OSError as exc:
        yield str(exc)
        return
    saved = {key: os.environ.get(key) for key in server.environment}
    os.environ.update(server.environment)
    yield server
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def bucket(s3_server) -> str:
    """A new, empty bucket on the test S3 server: its ``s3://`` URI."""
    if isinstance(s3_server, str):
        from databases import unavailable

        unavailable(s3_server)
    return s3_server.bucket()


@pytest.fixture(scope="session")
def spark(s3_server, tmp_path_factory):
    from databases import available_jars

    from framework.spark.session import spark_session

    jars = {"spark.jars": ",".join(available_jars())} if available_jars() else {}
    settings = Settings(spark=SparkSettings(master="local[2]", app_name="deltamark-tests",
                                            conf=jars | iceberg_catalog(
                                                tmp_path_factory.mktemp("iceberg"))))
    session = spark_session(settings)
    # The JVMs started after this one, each test's `deltamark run` processes, live seconds:
    # compiled by C1 only, they start ~1 s and run their first Delta write ~1.5 s sooner.
    # This long-lived JVM keeps Java's defaults (C1 alone makes it slower), as do the
    # benchmarks, which run apart from the tests.
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, ["-XX:TieredStopAtLevel=1", os.environ.get("SPARK_SUBMIT_OPTS")]))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kept_server(spark, tmp_path_factory):
    """A deltamark server kept for the module, in a runtime directory of its own: the
    commands of its tests' projects (``ws``'s Spark conf, this environment and working
    directory) fork from its warm JVM instead of each workflow run starting a server."""
    import yaml

    from framework import load_settings
    from framework.server.client import start_server

    conf = tmp_path_factory.mktemp("kept-server")
    (conf / "deltamark.yaml").write_text(yaml.safe_dump({"state_root": str(conf / "state")}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(conf))
        server, _ = start_server(load_settings(conf_dir=conf), idle_minutes=30)
        try:
            yield server
        finally:
            server.stop(now=True)


def iceberg_catalog(warehouse) -> dict[str, str]:
    """The Spark conf of the Iceberg catalog ``lake`` the tests' session has: a path
    (hadoop) catalog in ``warehouse`` (``spark.conf.get`` it to configure another)."""
    return {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.lake.type": "hadoop",
            "spark.sql.catalog.lake.warehouse": str(warehouse)}


@pytest.fixture
def engine(delta_path, spark):
    """The Delta engine of ``delta_path``: contract tests run on both paths."""
    from framework.delta import delta_engine

    return delta_engine(spark, mode=delta_path)


@pytest.fixture(params=["native", "embedded"])
def delta_path(request, spark) -> str:
    """Run the test on each Delta path: a test (or module) that uses this fixture gets a
    ``ws`` whose conf says ``delta: native`` or ``delta: embedded``."""
    if request.param == "native":
        from framework.delta import native_available

        if not native_available(spark):
            from databases import unavailable

            unavailable("native Delta path: Delta's jars are not on this Spark session "
                        "(bash .ci/setup.sh resolves them with mvn)")
    return request.param


@pytest.fixture
def ws(tmp_path, spark, request):
    """A project in tmp_path whose jobs run on the session's Spark (on the Delta path of
    ``delta_path`` when the test uses it, else ``auto``)."""
    from workspace import Workspace

    delta = request.getfixturevalue("delta_path") if "delta_path" in request.fixturenames \
        else "auto"
    return Workspace(tmp_path, spark, delta=delta)


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL server for the test session; each test takes its own database."""
    from databases import PostgresServer

    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    """An empty database of each kind: a SQLite file, a database on the test server."""
    from databases import sqlite_database

    if request.param == "sqlite":
        return sqlite_database(tmp_path)
    return request.getfixturevalue("pg_server").database()


@pytest.fixture(scope="session")
def airflow() -> Path:
    """Airflow 3's command, from a virtualenv of its own (bash .ci/test_tools.sh)."""
    command = Path(__file__).resolve().parents[1] / ".venv" / "airflow" / "bin" / "airflow"
    if not command.exists():
        from databases import unavailable

        unavailable(f"Airflow is not installed at {command} (bash .ci/test_tools.sh)")
    return command


@pytest.fixture(scope="session")
def airflow_database(airflow, tmp_path_factory) -> Path:
    """Airflow's metadata database (SQLite), migrated once for the test run."""
    home = tmp_path_factory.mktemp("airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True,
                   env={**os.environ, "AIRFLOW_HOME": str(home)})
    return home / "airflow.db"


@pytest.fixture
def airflow_home(airflow_database, tmp_path) -> Path:
    """An AIRFLOW_HOME of the test's own: an empty dags folder and a copy of the migrated
    database (``airflow db migrate`` runs once, not in each test)."""
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    shutil.copyfile(airflow_database, home / "airflow.db")
    return home
