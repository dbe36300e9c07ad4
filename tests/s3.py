"""A real S3-compatible server for tests: moto's, in its own process on 127.0.0.1.

It is started before the test session's Spark JVM, with the standard AWS environment
variables pointing at it, so delta-rs, pyarrow, obstore, Spark's S3A and every
``deltamark`` process the tests start find it as a user's tools would.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "deltamark-test", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
               "AWS_REGION": "us-east-1"}


class S3Server:
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
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise OSError(f"moto's S3 server did not start on {self.endpoint}") from None
                time.sleep(0.1)
        self.environment = {**ENVIRONMENT, "AWS_ENDPOINT_URL": self.endpoint}

    def bucket(self) -> str:
        """A new, empty bucket's URI (``s3://...``)."""
        name = f"t-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
        return f"s3://{name}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
