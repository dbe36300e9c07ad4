"""A Spark Connect server for tests: pyspark's own ``SparkConnectServer`` on a free port of
127.0.0.1, in a working directory of its own, with the conf deltamark would give a local
session (Delta's, S3A's and Avro's jars, the JDBC drivers, Delta's extension and catalog,
the test S3 server's settings)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

from framework.config import Settings, SparkSettings
from framework.spark.session import session_conf
from tests.databases import available_jars

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """``sc://127.0.0.1:PORT``; ``environment`` is the server's (its storage settings)."""

    def __init__(self, environment: dict[str, str], *, deltamark_on_workers: bool = False):
        home = Path(pyspark.__file__).parent
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.directory = tempfile.mkdtemp(prefix="deltamark-connect-server-")
        jars = {"spark.jars": ",".join(available_jars())} if available_jars() else {}
        conf = session_conf(Settings(spark=SparkSettings(master="local[2]", conf=jars)),
                            master="local[2]") | {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port)}
        self.log = Path(self.directory) / "server.log"
        # deltamark is not installed on a real server: its Python workers fail to import it
        # here too (unless deltamark_on_workers: a benchmark's foreachBatch writes with it),
        # so that a UDF's function that reached deltamark's modules fails a test
        workers = Path(self.directory) / "python-workers"
        if not deltamark_on_workers:
            (workers / "framework").mkdir(parents=True)
            (workers / "framework" / "__init__.py").write_text(
                "raise ImportError('deltamark is not installed on the Spark Connect server: "
                "a UDF sent its function by name')\n")
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                 "--master", "local[2]", *(word for key, value in conf.items()
                                           for word in ("--conf", f"{key}={value}")),
                 "spark-internal"],
                cwd=self.directory, stdout=output, stderr=subprocess.STDOUT,
                env={**os.environ, **environment, "SPARK_HOME": str(home),
                     "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(workers)},
                start_new_session=True)
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.25)
        tail = self.log.read_text(errors="replace")[-2000:]
        self.stop()
        raise OSError(f"Spark Connect server did not start on port {self.port}: {tail}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def without_java(environment: dict[str, str], directory: Path) -> dict[str, str]:
    """``environment`` whose ``java`` (first on PATH; no JAVA_HOME, no SPARK_HOME) exits
    1 after touching ``directory/java-started``: a process that started a JVM fails, and
    says so."""
    bin_dir = directory / "no-java-bin"
    bin_dir.mkdir(exist_ok=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\ntouch {directory / 'java-started'}\n"
                    "echo 'java: this client must start no JVM' >&2\nexit 1\n")
    java.chmod(0o755)
    return {k: v for k, v in environment.items() if k not in ("JAVA_HOME", "SPARK_HOME")} | {
        "PATH": os.pathsep.join([str(bin_dir), environment.get("PATH", "")])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
