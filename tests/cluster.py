"""A standalone Spark cluster for tests: a master and two workers on 127.0.0.1, started
with pyspark's own ``spark-class``, each worker offering one core."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark


class SparkCluster:
    """``spark://127.0.0.1:PORT`` with ``workers`` workers; the environment given is the
    workers' (and so their executors'), as a cluster's machines have their own."""

    def __init__(self, environment: dict[str, str], *, workers: int = 2):
        home = Path(pyspark.__file__).parent
        self.port, self.ui_port = _free_port(), _free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        env = {**os.environ, **environment, "SPARK_HOME": str(home),
               "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        spark_class = str(home / "bin" / "spark-class")
        self.processes = [subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(self.ui_port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        self._wait(lambda status: True, "the master")
        self.processes += [subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", self.master,
             "--host", "127.0.0.1", "--cores", "1", "--memory", "2g",
             "--webui-port", str(_free_port())],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(workers)]
        self._wait(lambda status: status.get("aliveworkers", 0) >= workers,
                   f"{workers} workers")

    def status(self) -> dict:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
            return json.load(r)

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if ready(self.status()):
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise OSError(f"standalone Spark cluster: {what} did not start within 90 s")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
