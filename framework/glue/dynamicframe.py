"""``DynamicFrame`` and ``DynamicFrameCollection``: Glue's frame shapes over Spark
DataFrames, with the methods Glue scripts commonly use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from framework.errors import GlueUnsupportedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DynamicFrame", "DynamicFrameCollection"]

# Glue's resolveChoice type names -> Spark SQL types
_TYPES = {"long": "bigint", "int": "int", "integer": "int", "short": "smallint",
          "byte": "tinyint", "double": "double", "float": "float", "string": "string",
          "boolean": "boolean", "date": "date", "timestamp": "timestamp",
          "decimal": "decimal(38,18)", "binary": "binary"}


class DynamicFrame:
    """A Spark DataFrame with Glue's DynamicFrame methods (a schema per frame, not per
    record: Glue's choice types become plain columns; ``resolveChoice`` casts them)."""

    def __init__(self, df: DataFrame, glue_ctx: Any = None, name: str = ""):
        self._df, self.glue_ctx, self.name = df, glue_ctx, name

    @classmethod
    def fromDF(cls, dataframe: DataFrame, glue_ctx: Any, name: str) -> DynamicFrame:  # noqa: N802
        return cls(dataframe, glue_ctx, name)

    def toDF(self) -> DataFrame:  # noqa: N802
        return self._df

    def count(self) -> int:
        return self._df.count()

    def schema(self) -> Any:
        return self._df.schema

    def printSchema(self) -> None:  # noqa: N802
        self._df.printSchema()

    def show(self, num_rows: int = 20) -> None:
        self._df.show(num_rows)

    def select_fields(self, paths: Sequence[str], transformation_ctx: str = "",
                      **_: Any) -> DynamicFrame:
        """The fields at ``paths``; absent ones are left out (as in Glue, where an empty
        read has no fields at all)."""
        return self._with(self._df.select(*[_column(p) for p in paths if self._has(p)]))

    def drop_fields(self, paths: Sequence[str], transformation_ctx: str = "",
                    **_: Any) -> DynamicFrame:
        return self._with(self._df.drop(*paths))

    def rename_field(self, oldName: str, newName: str, transformation_ctx: str = "",  # noqa: N803
                     **_: Any) -> DynamicFrame:
        return self._with(self._df.withColumnRenamed(oldName, newName))

    def filter(self, f: Callable[[Mapping[str, Any]], bool], transformation_ctx: str = "",
               **_: Any) -> DynamicFrame:
        """The records for which ``f(record)`` is true (``record`` reads like a dict)."""
        kept = self._df.rdd.filter(lambda row: bool(f(row.asDict(recursive=True))))
        return self._with(self._df.sparkSession.createDataFrame(kept, self._df.schema))

    def resolveChoice(self, specs: Sequence[tuple[str, str]] | None = None,  # noqa: N802
                      choice: str = "", transformation_ctx: str = "", **_: Any
                      ) -> DynamicFrame:
        """``specs=[("col", "cast:long")]`` (or ``project:long``), or ``choice=...`` for
        every column. Other actions (make_cols, make_struct, match_catalog) need Glue's
        per-record types and are not supported."""
        from pyspark.sql import functions as F

        pairs = list(specs) if specs else [(c, choice) for c in self._df.columns] if choice \
            else []
        df = self._df
        for path, action in pairs:
            kind, _, type_name = action.partition(":")
            if kind not in ("cast", "project") or type_name.lower() not in _TYPES:
                raise GlueUnsupportedError(
                    f"resolveChoice({path!r}, {action!r})", "cast:TYPE or project:TYPE with "
                    f"TYPE one of {', '.join(sorted(_TYPES))}; cast the DataFrame "
                    "(toDF().withColumn) for anything else")
            if self._has(path):
                # Glue: a value that does not cast becomes NULL
                df = df.withColumn(path, F.col(_column(path)).try_cast(_TYPES[type_name.lower()]))
        return self._with(df)

    def relationalize(self, root_table_name: str, staging_path: str = "",
                      options: Mapping[str, Any] | None = None, transformation_ctx: str = "",
                      **_: Any) -> DynamicFrameCollection:
        """Glue's Relationalize (``framework.transforms.relationalize``): the root table and
        one table per array, with deterministic keys; ``staging_path`` is not needed."""
        from framework.transforms import relationalize

        if not self._df.columns:  # an empty read: no fields, no arrays
            return DynamicFrameCollection({root_table_name: self._with(self._df)}, self.glue_ctx)
        tables = relationalize(self._df, root_table_name)
        return DynamicFrameCollection(
            {name: DynamicFrame(df, self.glue_ctx, name) for name, df in tables.items()},
            self.glue_ctx)

    def _has(self, path: str) -> bool:
        return path.split(".", 1)[0] in self._df.columns

    def _with(self, df: DataFrame) -> DynamicFrame:
        return DynamicFrame(df, self.glue_ctx, self.name)


class DynamicFrameCollection:
    """Named DynamicFrames (what Relationalize returns)."""

    def __init__(self, dynamic_frames: Mapping[str, DynamicFrame], glue_ctx: Any = None):
        self._frames, self.glue_ctx = dict(dynamic_frames), glue_ctx

    def keys(self) -> list[str]:
        return list(self._frames)

    def values(self) -> list[DynamicFrame]:
        return list(self._frames.values())

    def select(self, key: str, transformation_ctx: str = "") -> DynamicFrame:
        if key not in self._frames:
            raise KeyError(f"{key} (frames: {', '.join(self._frames)})")
        return self._frames[key]

    def __getitem__(self, key: str) -> DynamicFrame:
        return self.select(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)


def _column(path: str) -> str:
    """A Glue field path as a Spark column reference (``a.b`` is a nested field)."""
    return ".".join(f"`{part}`" for part in path.split("."))
