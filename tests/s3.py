"""Real S3-compatible servers for tests, each in its own process on 127.0.0.1.

- moto's (``S3Server``), the tests' default: started before the test session's Spark JVM,
  with the standard AWS environment variables pointing at it, so delta-rs, pyarrow,
  obstore, Spark's S3A and every ``deltamark`` process the tests start find it as a
  user's tools would. It slows down as a bucket grows past some thousand objects.
- S3Proxy (``S3ProxyServer``, Java, from Maven Central; .ci/test_tools.sh fetches it):
  holds 100,000 objects and more in memory (``transient``), or serves a directory whose
  files are the objects (``filesystem-nio2``): a file's modification time is the
  object's Last-Modified, so a test can make an object older than a listing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "deltamark-test", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
               "AWS_REGION": "us-east-1",
               # checksums only where S3 requires them, as before AWS SDKs of 2025: S3Proxy
               # 2.6 refuses the ones newer SDKs (pyarrow's, boto3's) add to every request
               "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
               "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}
S3PROXY_VERSION = "2.6.0"
S3PROXY_JAR = (Path(__file__).resolve().parents[1] / ".venv" / "share" / "deltamark"
               / "test-tools" / f"s3proxy-{S3PROXY_VERSION}-jar-with-dependencies.jar")


class _Server:
    """A server process on ``endpoint``, and the AWS environment that names it."""

    endpoint: str
    process: subprocess.Popen

    def _started(self, name: str) -> None:
        _wait_for(self.endpoint, self.process, name, self.stop)
        self.environment = {**ENVIRONMENT, "AWS_ENDPOINT_URL": self.endpoint}

    def bucket(self) -> str:
        """A new, empty bucket's URI (``s3://...``)."""
        return _new_bucket(self.endpoint)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a JVM out of memory ignores SIGTERM
            self.process.kill()
            self.process.wait()


class S3Server(_Server):
    """``moto_server`` on a free loopback port, and the AWS environment that names it."""

    def __init__(self):
        """Raises OSError, saying why, when the server cannot be started."""
        server = shutil.which("moto_server", path=os.path.dirname(sys.executable))
        if server is None:
            raise OSError("moto's S3 server is absent (pip install 'moto[server]')")
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._started("moto's S3 server")


class S3ProxyServer(_Server):
    """S3Proxy on a free loopback port: objects in memory (``directory`` None) or the files
    under ``directory``; ``environment`` names it as the AWS variables do."""

    def __init__(self, directory: str | None = None, *, heap: str = "1g"):
        """Raises OSError, saying why, when the server cannot be started."""
        java = shutil.which("java")
        if java is None or not S3PROXY_JAR.exists():
            raise OSError(f"S3Proxy is absent ({S3PROXY_JAR}: .ci/test_tools.sh fetches it)"
                          if java else "java is absent")
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._scratch = tempfile.mkdtemp(prefix="deltamark-s3proxy-")
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        backend = (["jclouds.provider=transient"] if directory is None else
                   ["jclouds.provider=filesystem-nio2", f"jclouds.filesystem.basedir={directory}"])
        properties = os.path.join(self._scratch, "s3proxy.properties")
        with open(properties, "w") as out:
            out.write("\n".join([
                f"s3proxy.endpoint={self.endpoint}", "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={ENVIRONMENT['AWS_ACCESS_KEY_ID']}",
                f"s3proxy.credential={ENVIRONMENT['AWS_SECRET_ACCESS_KEY']}",
                f"jclouds.identity={ENVIRONMENT['AWS_ACCESS_KEY_ID']}",
                f"jclouds.credential={ENVIRONMENT['AWS_SECRET_ACCESS_KEY']}", *backend]) + "\n")
        self.process = subprocess.Popen(
            [java, f"-Xmx{heap}", "-XX:+UseSerialGC",
             "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",
             "-jar", str(S3PROXY_JAR), "--properties", properties],
            env={**os.environ, "LOG_LEVEL": "warn"}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self._started("S3Proxy")

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self._scratch, ignore_errors=True)


def _wait_for(endpoint: str, process: subprocess.Popen, name: str, stop) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # it answers (S3Proxy refuses an anonymous listing of buckets)
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                stop()
                raise OSError(f"{name} did not start on {endpoint}") from None
            time.sleep(0.1)


def _new_bucket(endpoint: str) -> str:
    """A new, empty bucket's URI (``s3://...``), made with a signed request."""
    import pyarrow.fs as pafs

    name = f"t-{uuid.uuid4().hex[:12]}"
    fs = pafs.S3FileSystem(access_key=ENVIRONMENT["AWS_ACCESS_KEY_ID"],
                           secret_key=ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
                           region=ENVIRONMENT["AWS_REGION"], scheme="http",
                           endpoint_override=endpoint.removeprefix("http://"),
                           allow_bucket_creation=True)
    fs.create_dir(name)
    return f"s3://{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
