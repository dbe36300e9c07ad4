"""Delta's, S3A's, Avro's and Iceberg's jars for a Spark line: resolved from Maven, put on
sessions.

``python -m framework.spark.jars`` (run by ``.ci/setup.sh``) resolves, with ``mvn``, the jars made
for the installed pyspark's line (``framework.spark.lines``) into the virtualenv's
``share/deltamark/jars``, once per jar set, leaving out every artifact pyspark already ships
(its Hadoop, Jackson, Scala, ...). Spark never downloads a jar when a session starts (no
``spark.jars.packages``, no Ivy). A cluster that has its own Spark takes the set of its
version from ``python -m framework.spark.jars --spark 3.5.4 --into jars/`` (for ``--jars``).

Without Maven the set-up says so and carries on: sessions then have no Delta classes and
deltamark uses the embedded Delta path, as ``delta: auto`` allows.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from framework.errors import SparkVersionError
from framework.spark.lines import SparkLine, installed_version, line_of, spark_line

__all__ = ["class_path", "installed", "pom", "resolve"]

# A jar's artifact id is its file name up to the version: "-" then a digit.
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")
# What every Spark ships of what Delta, hadoop-aws and spark-avro depend on: left out of a
# jar set for a Spark that is not installed here (for the installed one, its jars say).
_EVERY_SPARK_SHIPS = ("antlr4-runtime", "scala-library", "spark-tags_2.12", "spark-tags_2.13",
                      "xz")


def pom(line: SparkLine, *, hadoop: str | None = None) -> str:
    """The Maven pom whose runtime dependencies are the jars deltamark adds to ``line``
    (``hadoop``: the Hadoop its Spark ships, when it differs from the line's)."""
    delta = "" if line.delta is None else _dependency("io.delta", *line.delta, exclusions=(
        # pyspark routes commons-logging through jcl-over-slf4j, and ships RoaringBitmap's
        # shims where its RoaringBitmap needs them
        ("commons-logging", "commons-logging"), ("org.roaringbitmap", "shims")))
    iceberg = "" if line.iceberg is None else "\n" + _dependency("org.apache.iceberg",
                                                                 *line.iceberg)
    # the text names the jar set a virtualenv holds (_marker): its old path stays, or every
    # virtualenv would fetch its jars again
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- The jars deltamark adds to Spark {line.name} (framework/jars.py) -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>deltamark</groupId>
  <artifactId>deltamark-spark-{line.name}-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies>
{_dependency("com.fasterxml.jackson.datatype", "jackson-datatype-jdk8", line.jackson)}
  </dependencies></dependencyManagement>
  <dependencies>
{delta}
{_dependency("org.apache.hadoop", "hadoop-aws", hadoop or line.hadoop)}
{_dependency("org.apache.spark", f"spark-avro_{line.scala}", line.avro)}{iceberg}
  </dependencies>
</project>
"""


def installed() -> list[Path]:
    """The jars the set-up resolved for the installed pyspark, sorted; empty when it has
    not (or pyspark is missing, or of an unsupported line)."""
    try:
        directory = _directory()
        marker = _marker(_installed_pom())
    except SparkVersionError:
        return []
    if not (directory / marker).exists():
        return []
    return sorted(directory.glob("*.jar"))


def class_path() -> str:
    """The resolved jars as a Java class path ('' when there are none)."""
    return os.pathsep.join(str(jar) for jar in installed())


def resolve(spark_version: str | None = None, *, into: Path | None = None) -> list[Path]:
    """Resolve, with ``mvn``, the jars for Spark ``spark_version`` (default: the installed
    pyspark's) into the directory ``into`` (made if missing; other files in it are left
    alone), or else into the virtualenv, unless they are resolved there already.

    Raises:
        SparkVersionError: the version is not of a supported line (or pyspark is missing).
        RuntimeError: ``mvn`` is missing or failed; the message is one line saying why.
    """
    if into is None and (jars := installed()):
        return jars
    if spark_version is None or (
            (version := installed_version()) is not None
            and line_of(version) == line_of(spark_version)):
        text, shipped = _installed_pom(), set(_pyspark_jars())
    else:
        text, shipped = pom(line_of(spark_version)), set(_EVERY_SPARK_SHIPS)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn not found on PATH (apt-get install maven)")
    directory = into or _directory()
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix="jars-") as partial:
        os.chmod(partial, 0o755)  # readable by Spark workers running as other users
        pom_file = Path(partial) / "pom.xml"
        pom_file.write_text(text)
        done = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom_file), "dependency:copy-dependencies",
             f"-DoutputDirectory={partial}", "-DincludeScope=runtime",
             f"-DexcludeArtifactIds={','.join(sorted(shipped))}"],
            capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"mvn failed: {_first_error(done.stdout + done.stderr)}")
        pom_file.unlink()
        resolved = sorted(Path(partial).glob("*.jar"))
        if into is not None:  # a directory of the user's: add the jars, remove nothing
            into.mkdir(parents=True, exist_ok=True)
            for jar in resolved:
                os.replace(jar, into / jar.name)
            return [into / jar.name for jar in resolved]
        (Path(partial) / _marker(text)).touch()
        shutil.rmtree(directory, ignore_errors=True)
        os.rename(partial, directory)
    return installed()


def _installed_pom() -> str:
    """The pom for the installed pyspark: its line's, with the Hadoop it ships."""
    return pom(spark_line(), hadoop=_pyspark_jars().get("hadoop-client-api"))


def _pyspark_jars() -> dict[str, str]:
    """The artifacts the installed pyspark ships, with their versions."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {m["artifact"]: m["version"] for jar in jars.glob("*.jar")
            if (m := _VERSIONED.match(jar.name))}


def _dependency(group: str, artifact: str, version: str, *,
                exclusions: tuple[tuple[str, str], ...] = ()) -> str:
    excluded = "".join(f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId>"
                       "</exclusion>" for g, a in exclusions)
    return (f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>"
            + (f"<exclusions>{excluded}</exclusions>" if excluded else "") + "</dependency>")


def _first_error(output: str) -> str:
    errors = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines()
              if line.startswith("[ERROR]") and line.strip() != "[ERROR]"]
    return (errors or [output.strip() or "no output"])[0][:300]


def _directory() -> Path:
    return Path(sys.prefix) / "share" / "deltamark" / "jars"


def _marker(pom_text: str) -> str:
    return f".resolved-{hashlib.sha256(pom_text.encode()).hexdigest()[:12]}"


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m framework.spark.jars",
        description="Resolve the jars deltamark adds to Spark (Delta, S3A, Avro, Iceberg) "
                    "with mvn: for the installed pyspark into the virtualenv, or for the Spark "
                    "version of a cluster (--spark) into a directory (--into).")
    parser.add_argument("--class-path", action="store_true",
                        help="print the installed jars as a class path (for spark-submit)")
    parser.add_argument("--spark", metavar="VERSION",
                        help="the cluster's Spark version, e.g. 3.5.4 (needs --into)")
    parser.add_argument("--into", metavar="DIR", type=Path,
                        help="where to put the jars; prints them for spark-submit --jars")
    args = parser.parse_args(argv)
    if args.class_path:
        print(class_path())
        return 0 if installed() else 1
    if (args.spark is None) != (args.into is None):
        parser.error("--spark and --into go together")
    what = (f"Spark jars (Delta, S3A, Avro, Iceberg) for Spark "
            f"{args.spark or installed_version()}")
    try:
        found = resolve(args.spark, into=args.into.resolve() if args.into else None)
    except (OSError, RuntimeError, SparkVersionError) as exc:
        print(f"{what}: not installed ({exc}); the native Delta path, s3:// on Spark, "
              "Spark's Avro reader and Iceberg tables need them, the embedded path works",
              file=sys.stderr)
        return 1 if args.into else 0
    size = sum(jar.stat().st_size for jar in found) / 2**20
    print(f"{what}: {len(found)} in {found[0].parent if found else '-'} ({size:.0f} MB)",
          file=sys.stderr if args.into else sys.stdout)
    if args.into:
        print(",".join(str(jar) for jar in found))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
