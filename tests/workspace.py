"""A throwaway deltamark project for tests: conf dir, landing dir, target, state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from framework import load_settings, run_job
from framework.state.table_io import open_store

SUPPORT = Path(__file__).with_name("support_jobs.py")


class Workspace:
    def __init__(self, root: Path, spark, *, delta: str = "auto"):
        self.root, self.spark, self.delta = root, spark, delta
        self.conf = root / "conf"
        (self.conf / "jobs").mkdir(parents=True)
        (self.conf / "deltamark.yaml").write_text(
            yaml.safe_dump({"state_root": str(root / "state"), "delta": delta}))
        self.landing = root / "landing"
        self.landing.mkdir()
        self.target = str(root / "lake" / "target")
        self.settings = load_settings(conf_dir=self.conf)
        self.store = open_store(root / "state")
        self.batches = 0

    def connect(self, db, name: str = "db") -> str:
        """Declare ``db`` as a connection in conf, its password read from the environment."""
        connection = {"url": db.url}
        if db.user:
            os.environ["DELTAMARK_TEST_DB_PASSWORD"] = db.password
            connection |= {"user": db.user, "password": "${DELTAMARK_TEST_DB_PASSWORD}"}
        from databases import available_jars

        (self.conf / "deltamark.yaml").write_text(yaml.safe_dump(
            {"state_root": str(self.root / "state"), "delta": self.delta,
             "connections": {name: connection},
             "spark": {"conf": {"spark.jars": ",".join(available_jars())}}}))
        self.settings = load_settings(conf_dir=self.conf)
        return name

    def use_iceberg(self, catalog: dict[str, str] | None = None, *,
                    session: bool = True) -> str:
        """Configure an Iceberg catalog in this project's conf: the tests' session's
        (``lake``), or the ``spark.sql.catalog.<name>.*`` conf ``catalog``, which the
        session takes too unless not ``session``. Returns ``<catalog>.<a namespace of
        this workspace's own>``."""
        if catalog is None:
            catalog = {key: self.spark.conf.get(key) for key in (
                "spark.sql.catalog.lake", "spark.sql.catalog.lake.type",
                "spark.sql.catalog.lake.warehouse")}
        for key, value in catalog.items() if session else ():
            self.spark.conf.set(key, value)
        settings = yaml.safe_load((self.conf / "deltamark.yaml").read_text())
        settings.setdefault("spark", {}).setdefault("conf", {}).update(catalog)
        (self.conf / "deltamark.yaml").write_text(yaml.safe_dump(settings))
        self.settings = load_settings(conf_dir=self.conf)
        name = min(catalog, key=len).removeprefix("spark.sql.catalog.")
        return f"{name}.{self.root.name.replace('-', '_').lower()}"

    def declare(self, name="copy", cls="CopyFiles", bookmark="enable", checks=None, **params):
        spec = {"class": f"{SUPPORT}:{cls}", "bookmark": bookmark,
                "params": {"landing": str(self.landing), "target": self.target, **params}}
        if checks is not None:
            spec["checks"] = checks
        (self.conf / "jobs" / f"{name}.yaml").write_text(yaml.safe_dump(spec))

    def land(self, rows=3, name=None) -> Path:
        self.batches += 1
        path = self.landing / (name or f"batch-{self.batches:03}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"id": self.batches * 100 + i}) + "\n"
                                for i in range(rows)))
        return path

    def run(self, name="copy", **kwargs):
        return run_job(self.settings, name, spark=self.spark, **kwargs)

    def ids(self) -> list[int]:
        from framework.delta import delta_engine

        df = delta_engine(self.spark, mode="embedded").read(self.target)
        return sorted(r.id for r in df.select("id").collect())

    def start_run(self, job: str = "copy", *, own_group: bool = False,
                  **env: str) -> subprocess.Popen:
        """``deltamark run JOB`` in its own process, as a scheduler would start it (in a
        process group of its own with its JVM, when ``own_group``)."""
        return subprocess.Popen(
            [sys.executable, "-m", "framework", "--conf-dir", str(self.conf), "run", job],
            cwd=self.root, env={**os.environ, **env}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=own_group)

    def rows(self, table: str) -> list[tuple[int, str]]:
        """(id, source file name) of every row of a target, sorted."""
        from framework.delta import delta_engine

        df = delta_engine(self.spark, mode="embedded").read(table)
        return sorted((r.id, r.source_file.rsplit("/", 1)[-1])
                      for r in df.select("id", "source_file").collect())
