"""The interface jobs use for Delta tables, whichever path (native or embedded) is active."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from framework.delta import log
from framework.delta.filters import Filter
from framework.delta.log import AppTransaction, Commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DeltaEngine", "WriteMode", "WriteResult"]

WriteMode = Literal["append", "overwrite"]


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version it created, or that it was a replay."""

    version: int
    skipped: bool = False


class DeltaEngine(ABC):
    """Read and write Delta tables from Spark.

    Log-level questions (version, history, app transactions) are answered from the Delta
    log through delta-rs on both paths: they need no Spark job.
    """

    name: ClassVar[str]

    def __init__(self, spark: SparkSession):
        self.spark = spark

    @abstractmethod
    def read(
        self,
        path: str,
        *,
        version: int | None = None,
        timestamp: datetime | str | None = None,
        filters: Sequence[Filter] = (),
    ) -> DataFrame:
        """The table as a DataFrame: latest, at ``version`` or at ``timestamp``.

        ``filters`` (``[("col", ">=", 5), ...]``, all ANDed) prune partitions and skip files
        by the statistics in the log, and are applied to the rows.

        Raises:
            TableNotFoundError, VersionNotFoundError, UnsupportedTableFeatureError
        """

    def write(
        self,
        df: DataFrame,
        path: str,
        *,
        mode: WriteMode = "append",
        partition_by: Sequence[str] = (),
        replace_where: Sequence[Filter] = (),
        merge_schema: bool = False,
        txn: AppTransaction | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Write ``df`` in one Delta commit.

        Args:
            mode: ``append`` or ``overwrite`` (the whole table, or with ``replace_where``
                only the partitions matching those partition-column filters).
            partition_by: partition columns when the table is created; must match after.
            merge_schema: allow new columns (added as nullable).
            txn: the commit carries this app transaction; a write whose version is not
                above the table's version for that app id is a replay and is skipped.
            metadata: JSON-able mapping stored as the commit's ``userMetadata``.

        Raises:
            SchemaMismatchError, WriteConflictError
        """
        if txn is not None:
            done = log.transaction_version(path, txn.app_id)
            if done is not None and done >= txn.version:
                return WriteResult(version=log.table_version(path) or 0, skipped=True)
        version = self._write(df, path, mode=mode, partition_by=tuple(partition_by),
                              replace_where=tuple(replace_where), merge_schema=merge_schema,
                              txn=txn, metadata=metadata)
        return WriteResult(version=version)

    @abstractmethod
    def _write(self, df: DataFrame, path: str, *, mode: WriteMode,
               partition_by: tuple[str, ...], replace_where: tuple[Filter, ...],
               merge_schema: bool, txn: AppTransaction | None,
               metadata: Mapping[str, Any] | None) -> int:
        """Write and commit; return the new table version."""

    def version(self, path: str) -> int | None:
        """The latest table version, or None when there is no table."""
        return log.table_version(path)

    def history(self, path: str, *, limit: int | None = None) -> list[Commit]:
        """The table's commits, newest first."""
        return log.history(path, limit=limit)

    def transaction_version(self, path: str, app_id: str) -> int | None:
        """The highest app-transaction version committed by ``app_id``, if any."""
        return log.transaction_version(path, app_id)
