"""Delta tables from Spark, on the native (delta-spark) or embedded (delta-rs) path.

    engine = delta_engine(spark, mode="auto")
    engine.write(df, "data/lake/orders", txn=AppTransaction("orders_ingest", 7))
    engine.read("data/lake/orders", version=3, filters=[("day", ">=", "2024-01-01")])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from framework.config import DeltaMode
from framework.delta.filters import Filter, InvalidFilterError
from framework.delta.log import AppTransaction, Commit
from framework.errors import DeltaEngineUnavailableError
from framework.spark.lines import LINES, spark_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.delta.embedded import EmbeddedEngine
    from framework.delta.engine import DeltaEngine, WriteMode, WriteResult
    from framework.delta.native import NativeEngine, native_available

#: the engines, imported where used: the state store and the read-only commands read the
#: log alone (``framework.delta.log``)
_LAZY = {"EmbeddedEngine": "embedded", "DeltaEngine": "engine", "WriteMode": "engine",
         "WriteResult": "engine", "NativeEngine": "native", "native_available": "native"}

__all__ = [
    "AppTransaction",
    "Commit",
    "DeltaEngine",
    "EmbeddedEngine",
    "Filter",
    "InvalidFilterError",
    "NativeEngine",
    "WriteMode",
    "WriteResult",
    "delta_engine",
    "native_available",
]


def delta_engine(spark: SparkSession, *, mode: DeltaMode = "auto") -> DeltaEngine:
    """The Delta path for ``spark``: ``auto`` picks native when Delta's classes are loaded.

    Args:
        spark: the session the engine reads and writes with.
        mode: ``auto``, ``native`` (delta-spark) or ``embedded`` (delta-rs with Spark's
            Parquet I/O).

    Returns:
        The engine; ``engine.name`` says which path it is.

    Example::

        engine = delta_engine(spark)
        engine.write(df, "data/lake/orders", txn=AppTransaction("orders_ingest", 7))

    Raises:
        DeltaEngineUnavailableError: ``native`` was asked for but Delta's jars are absent.
    """
    from framework.delta.embedded import EmbeddedEngine
    from framework.delta.native import NativeEngine, native_available

    if mode == "embedded":
        return EmbeddedEngine(spark)
    if native_available(spark):
        return NativeEngine(spark)
    if mode == "native":
        raise DeltaEngineUnavailableError(_native_missing())
    return EmbeddedEngine(spark)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'framework.delta' has no attribute {name!r}")
    return getattr(importlib.import_module(f"framework.delta.{_LAZY[name]}"), name)


def _native_missing() -> str:
    """Why ``delta: native`` cannot be had, and what to do, for the running Spark line."""
    line = spark_line()
    if line.delta is None:
        return (f"delta: native needs Delta's jars, and Delta has no release for Spark "
                f"{line.name} yet: set delta: embedded (or run on Spark "
                f"{max(n for n, other in LINES.items() if other.delta)})")
    artifact, version = line.delta
    return (
        "delta: native needs Delta's classes on the Spark session, and they are not there "
        "(io.delta.tables.DeltaTable not found, or spark.sql.extensions lacks "
        f"io.delta.sql.DeltaSparkSessionExtension). List {artifact}-{version}.jar and "
        f"delta-storage-{version}.jar in spark.conf spark.jars (python -m framework.spark.jars "
        "resolves them), or set delta: embedded.")
