"""Delta's, S3A's and Avro's jars: resolved from Maven by the set-up, put on local sessions.

``python -m framework.jars`` (run by ``.ci/setup.sh``) resolves ``java/pom.xml`` with ``mvn``
into the virtualenv's ``share/deltamark/jars``, once per version of the pom, leaving out
every artifact pyspark already ships (its Hadoop, Jackson, Scala, Parquet, ...). Spark never
downloads a jar when a session starts (no ``spark.jars.packages``, no Ivy).

Without Maven the set-up says so and carries on: sessions then have no Delta classes and
deltamark uses the embedded Delta path, as ``delta: auto`` allows.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["POM", "class_path", "installed", "resolve"]

POM = Path(__file__).parent / "java" / "pom.xml"
# A jar's artifact id is its file name up to the version: "-" then a digit.
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[^/]*\.jar$")


def installed() -> list[Path]:
    """The resolved jars, sorted; empty when the set-up has not resolved this pom."""
    directory = _directory()
    if not (directory / _marker()).exists():
        return []
    return sorted(directory.glob("*.jar"))


def class_path() -> str:
    """The resolved jars as a Java class path ('' when there are none)."""
    return os.pathsep.join(str(jar) for jar in installed())


def resolve() -> list[Path]:
    """Resolve the pom's jars with ``mvn`` unless this version of it is resolved already.

    Raises:
        RuntimeError: ``mvn`` is missing or failed; the message is one line saying why.
    """
    if jars := installed():
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn not found on PATH (apt-get install maven)")
    directory = _directory()
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix="jars-") as partial:
        os.chmod(partial, 0o755)  # readable by Spark workers running as other users
        done = subprocess.run(
            [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={partial}", "-DincludeScope=runtime",
             f"-DexcludeArtifactIds={','.join(sorted(_shipped_by_pyspark()))}"],
            capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"mvn failed: {_first_error(done.stdout + done.stderr)}")
        (Path(partial) / _marker()).touch()
        shutil.rmtree(directory, ignore_errors=True)
        os.rename(partial, directory)
    return installed()


def _shipped_by_pyspark() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {m["artifact"] for jar in jars.glob("*.jar") if (m := _VERSIONED.match(jar.name))}


def _first_error(output: str) -> str:
    errors = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines()
              if line.startswith("[ERROR]") and line.strip() != "[ERROR]"]
    return (errors or [output.strip() or "no output"])[0][:300]


def _directory() -> Path:
    return Path(sys.prefix) / "share" / "deltamark" / "jars"


def _marker() -> str:
    return f".resolved-{hashlib.sha256(POM.read_bytes()).hexdigest()[:12]}"


if __name__ == "__main__":  # the set-up: python -m framework.jars [--class-path]
    if sys.argv[1:] == ["--class-path"]:  # for spark-submit --driver-class-path
        print(class_path())
        sys.exit(0 if installed() else 1)
    try:
        found = resolve()
        size = sum(jar.stat().st_size for jar in found) / 2**20
        print(f"Spark jars (Delta, S3A, Avro): {len(found)} in {_directory()} ({size:.0f} MB)")
    except RuntimeError as exc:
        print(f"Spark jars (Delta, S3A, Avro): not installed ({exc}); the native Delta path, "
              "s3:// on Spark and Spark's Avro reader need them, the embedded path works")
