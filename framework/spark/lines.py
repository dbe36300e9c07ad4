"""The Spark lines deltamark supports, and the jars made for each.

deltamark runs on the Spark its users have: Spark 3.5 to 4.3. Each line gets the Delta
release built for it (Delta 3.3 for Spark 3.5, whose Scala is 2.12; Delta 4.4's
``delta-spark_<line>_2.13`` for 4.0, 4.1 and 4.2); a line Delta has no release for yet
(4.3) has the embedded Delta path only. S3A is the ``hadoop-aws`` of the Hadoop the line's
Spark ships, with the AWS SDK that Hadoop was built against (Maven brings it). Iceberg's
Spark runtime exists for 3.5, 4.0 and 4.1; Iceberg tables need one of those lines.

    line = spark_line()              # the installed pyspark's, or SparkVersionError
    line.delta                       # ('delta-spark_2.12', '3.3.2'), or None
    line.iceberg                     # ('iceberg-spark-runtime-3.5_2.12', '1.11.0'), or None
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from framework.errors import SparkFeatureError, SparkVersionError

__all__ = ["LINES", "SUPPORTED", "SparkLine", "at_least", "installed_version", "lacking",
           "line_of", "require", "require_iceberg_runtime", "spark_line"]


@dataclass(frozen=True)
class SparkLine:
    """A supported Spark line and the JVM artifacts deltamark adds to it.

    Attributes:
        name: the line, ``"3.5"``.
        scala: the Scala version its jars are built for.
        hadoop: the Hadoop its pyspark ships (``hadoop-aws`` must be the same).
        jackson: the Jackson its pyspark ships (Jackson modules Delta brings must match).
        avro: the ``spark-avro`` release to take (the line's newest on Maven Central).
        delta: Delta's ``(artifact, version)`` for the line; None where Delta has none.
        iceberg: Iceberg's Spark runtime ``(artifact, version)``; None where Iceberg has none.
        pythons: the Python versions its pyspark takes, from 3.11 (deltamark's oldest).
    """

    name: str
    scala: str
    hadoop: str
    jackson: str
    avro: str
    delta: tuple[str, str] | None
    pythons: str
    iceberg: tuple[str, str] | None = None


LINES: dict[str, SparkLine] = {line.name: line for line in (
    SparkLine("3.5", scala="2.12", hadoop="3.3.4", jackson="2.15.2", avro="3.5.7",
              delta=("delta-spark_2.12", "3.3.2"), pythons="3.11",
              iceberg=("iceberg-spark-runtime-3.5_2.12", "1.11.0")),
    SparkLine("4.0", scala="2.13", hadoop="3.4.1", jackson="2.18.2", avro="4.0.1",
              delta=("delta-spark_4.0_2.13", "4.4.0"), pythons="3.11-3.13",
              iceberg=("iceberg-spark-runtime-4.0_2.13", "1.11.0")),
    SparkLine("4.1", scala="2.13", hadoop="3.4.2", jackson="2.20.0", avro="4.1.1",
              delta=("delta-spark_4.1_2.13", "4.4.0"), pythons="3.11-3.14",
              iceberg=("iceberg-spark-runtime-4.1_2.13", "1.11.0")),
    SparkLine("4.2", scala="2.13", hadoop="3.5.0", jackson="2.21.2", avro="4.2.0",
              delta=("delta-spark_4.2_2.13", "4.4.0"), pythons="3.11-3.14"),
    SparkLine("4.3", scala="2.13", hadoop="3.5.0", jackson="2.21.2", avro="4.2.0",
              delta=None, pythons="3.11-3.14"),
)}

#: the range, as messages name it
SUPPORTED = f"Spark {min(LINES)} to {max(LINES)}"


def line_of(version: str) -> SparkLine:
    """The line of Spark ``version`` (``"3.5.7"``, ``"4.1"``).

    Raises:
        SparkVersionError: the version is not of a supported line.
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    line = LINES.get(f"{match[1]}.{match[2]}") if match else None
    if line is None:
        raise SparkVersionError(version, SUPPORTED)
    return line


def installed_version() -> str | None:
    """The installed pyspark's version, or None when pyspark is not installed."""
    try:
        from pyspark.version import __version__
    except ImportError:
        return None
    return __version__


def spark_line() -> SparkLine:
    """The line of the installed pyspark.

    Raises:
        SparkVersionError: pyspark is missing or of an unsupported line; the message says
            which lines are supported and how to install one.
    """
    version = installed_version()
    if version is None:
        raise SparkVersionError(None, SUPPORTED)
    return line_of(version)


def at_least(since: str) -> bool:
    """Whether the installed Spark is ``since`` or newer (True when pyspark is missing:
    ``spark_line`` refuses that where it matters)."""
    version = installed_version()
    return version is None or _numbers(version) >= _numbers(since)


def lacking(feature: str, *, since: str) -> str | None:
    """Why ``feature`` cannot run on the installed Spark, older than ``since``; else None."""
    if at_least(since):
        return None
    return f"{feature}: needs Spark {since} or newer (this is Spark {installed_version()})"


def require(feature: str, *, since: str) -> None:
    """Refuse ``feature`` on a Spark older than ``since``.

    Raises:
        SparkFeatureError: in one line naming the feature and both versions.
    """
    if why := lacking(feature, since=since):
        raise SparkFeatureError(why)


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


def require_iceberg_runtime() -> None:
    """Refuse Iceberg tables on a Spark line Iceberg has no Spark runtime for.

    Raises:
        SparkFeatureError: in one line naming the lines that have one.
    """
    version = installed_version()
    if version is not None and line_of(version).iceberg is None:
        lines = ", ".join(name for name, line in LINES.items() if line.iceberg)
        raise SparkFeatureError(f"Iceberg tables: Iceberg has no Spark runtime for Spark "
                                f"{version}; they need Spark {lines}")
