"""``DynamicFrame`` and ``DynamicFrameCollection``: Glue's frame shapes over Spark
DataFrames, with the methods Glue scripts commonly use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from framework.errors import GlueUnsupportedError
from framework.glue.api import GlueApi
from framework.spark.session import json_schema, named_column, try_cast

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["DynamicFrame", "DynamicFrameCollection"]

# Glue's resolveChoice type names -> Spark SQL types
_TYPES = {"long": "bigint", "bigint": "bigint", "int": "int", "integer": "int",
          "short": "smallint", "smallint": "smallint", "byte": "tinyint",
          "tinyint": "tinyint", "double": "double", "float": "float", "string": "string",
          "varchar": "string", "char": "string", "boolean": "boolean", "date": "date",
          "timestamp": "timestamp", "decimal": "decimal(10,2)", "binary": "binary"}
#: Glue's nested and choice type names: a value mapped to one keeps its own type
_NESTED_TYPES = ("array", "struct", "map", "choice")


class DynamicFrame(GlueApi):
    """A Spark DataFrame with Glue's DynamicFrame methods (a schema per frame, not per
    record: Glue's choice types become plain columns; ``resolveChoice`` casts them)."""

    glue_name = "DynamicFrame"

    def __init__(self, df: DataFrame, glue_ctx: Any = None, name: str = "", *,
                 errors: Sequence[Callable[[], DataFrame]] = (), stage_errors: int = 0):
        self._df, self.glue_ctx, self.name = df, glue_ctx, name
        #: the error records ``map`` and ``filter`` left out on the way here (each computed
        #: when asked for, by running their functions again); the last ``stage_errors``
        #: are the step's that made this frame
        self._errors = tuple(errors)
        self._stage_errors = stage_errors

    @classmethod
    def fromDF(cls, dataframe: DataFrame, glue_ctx: Any, name: str) -> DynamicFrame:  # noqa: N802
        return cls(dataframe, glue_ctx, name)

    def toDF(self) -> DataFrame:  # noqa: N802
        return self._df

    def count(self) -> int:
        return self._df.count()

    def errorsCount(self) -> int:  # noqa: N802
        """How many error records (a ``map`` or ``filter`` function raised) were left out
        on the way to this frame; counted when asked, by running those functions again."""
        return sum(errors().count() for errors in self._errors)

    def stageErrorsCount(self) -> int:  # noqa: N802
        """How many error records the step that made this frame left out."""
        own = self._errors[len(self._errors) - self._stage_errors:]
        return sum(errors().count() for errors in own)

    def errorsAsDynamicFrame(self) -> DynamicFrame:  # noqa: N802
        """The error records left out on the way to this frame, as Glue keeps them: one
        field ``error`` (``callsite`` {``site``, ``info``}, ``msg``, ``stackTrace``,
        ``input``, ``bytesread``, ``source``, ``dynamicRecord``: the record)."""
        from functools import reduce

        from pyspark.sql.types import StructType

        frames = [errors() for errors in self._errors]
        if not frames:
            spark = self._df.sparkSession
            return DynamicFrame(spark.createDataFrame([], StructType([])), self.glue_ctx,
                                f"{self.name}_errors")
        return DynamicFrame(reduce(_union_errors, frames), self.glue_ctx,
                            f"{self.name}_errors")

    def schema(self) -> Any:
        return self._df.schema

    def printSchema(self) -> None:  # noqa: N802
        self._df.printSchema()

    def show(self, num_rows: int = 20) -> None:
        self._df.show(num_rows)

    def select_fields(self, paths: Sequence[str], transformation_ctx: str = "",
                      **_: Any) -> DynamicFrame:
        """The fields at ``paths`` (``a.b`` keeps ``b`` in struct ``a``); absent ones are
        left out (as in Glue, where an empty read has no fields at all)."""
        from pyspark.sql import functions as F

        return self._with(self._df.select(*_structs(_tree(
            (p, F.col(_column(p))) for p in paths if _exists(self._df, p)))))

    def drop_fields(self, paths: Sequence[str], transformation_ctx: str = "",
                    **_: Any) -> DynamicFrame:
        """Without the fields at ``paths`` (``a.b`` is field ``b`` of struct ``a``)."""
        df = self._df
        for path in paths:
            if _exists(df, path):
                df = _without(df, path)
        return self._with(df)

    def rename_field(self, oldName: str, newName: str, transformation_ctx: str = "",  # noqa: N803
                     **_: Any) -> DynamicFrame:
        """The field at ``oldName`` moved to ``newName`` (full paths, as in Glue)."""
        from pyspark.sql import functions as F

        if oldName == newName or not _exists(self._df, oldName):
            return self
        if "." not in oldName + newName:
            return self._with(self._df.withColumnRenamed(oldName, newName))
        moved = _with_field(self._df, newName, F.col(_column(oldName)))
        return self._with(_without(moved, oldName))

    def apply_mapping(self, mappings: Sequence[Sequence[str]], case_sensitive: bool = False,
                      transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Only the mapped fields: each ``(source, source_type, target, target_type)``
        takes the field at ``source``, casts it to ``target_type`` (a value that does not
        cast becomes null) and puts it at ``target`` (``a.b`` builds struct ``a``).
        Mappings whose source field is absent are left out, as in Glue; one to
        ``array``, ``struct``, ``map`` or ``choice`` keeps the value's own type."""
        from pyspark.sql import functions as F

        placed = []
        for mapping in mappings:
            if len(mapping) != 4:
                raise GlueUnsupportedError(
                    f"apply_mapping({tuple(mapping)!r})",
                    "give (source, source_type, target, target_type) tuples")
            source, _source_type, target, target_type = mapping
            if not _exists(self._df, source):
                continue
            value = F.col(_column(source)) if target_type.strip().lower() in _NESTED_TYPES \
                else try_cast(_column(source), _spark_type(target_type, "apply_mapping"))
            placed.append((target, value))
        return self._with(self._df.select(*_structs(_tree(placed))))

    def join(self, paths1: str | Sequence[str], paths2: str | Sequence[str],
             frame2: DynamicFrame, transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """The inner equality join of this frame's ``paths1`` with ``frame2``'s ``paths2``,
        keeping every field of both, as Glue does: where a record of each side has a field
        of the same name (a key or not), this frame's keeps the name and ``frame2``'s is
        ``.name``; where only one side has it (the other's is null), it is ``name``. A
        ``.name`` field no joined record needs is left out, so reading the joined frame's
        schema costs a pass over it when the frames share fields beyond the keys."""
        keys1, keys2 = _list(paths1), _list(paths2)
        left, right = self._df, frame2.toDF()
        if len(keys1) != len(keys2):
            raise GlueUnsupportedError(f"join({keys1}, {keys2})",
                                       "give as many keys on each side")
        if not all(_exists(left, k) for k in keys1) or not all(_exists(right, k) for k in keys2):
            return self._with(left.limit(0).crossJoin(right.limit(0)))  # an empty side
        condition = [left[_column(a)] == right[_column(b)] for a, b in zip(keys1, keys2,
                                                                           strict=True)]
        joined = left.join(right, condition, "inner")
        return self._with(_shared_fields_apart(joined, left, right, keys1, keys2),
                          *frame2._errors)

    def filter(self, f: Callable[[Mapping[str, Any]], bool], transformation_ctx: str = "",
               info: str = "", **_: Any) -> DynamicFrame:
        """The records for which ``f(record)`` is true (``record`` reads like a dict). A
        record for which ``f`` raises KeyError, ValueError or TypeError is left out, as
        in Glue; one for which it raises anything else is an error record
        (``errorsCount``, ``errorsAsDynamicFrame``)."""
        def verdict(row: Any) -> bool | BaseException:
            try:
                return bool(f(row.asDict(recursive=True)))
            except (KeyError, ValueError, TypeError):
                return False
            except Exception as exc:  # noqa: BLE001 - Glue's error records
                return exc

        source = self._df
        if not source.columns:  # a run with nothing new: nothing to filter
            return self
        keep = _udf(lambda row: verdict(row) is True, "boolean")
        return self._with(source.where(keep(_record(source))),
                          _error_records(source, verdict, _call_site(), info))

    def map(self, f: Callable[[dict[str, Any]], Mapping[str, Any]],
            transformation_ctx: str = "", info: str = "", **_: Any) -> DynamicFrame:
        """Each record as ``f(record)`` returns it (a dict; the fields it has make the
        new schema). A record for which ``f`` raises (or returns nothing) is an error
        record, left out (``errorsCount``, ``errorsAsDynamicFrame``), as in Glue."""
        import functools
        import json

        from pyspark.sql.types import StructType, _merge_type

        def outcome(row: Any) -> dict[str, Any] | BaseException:
            try:
                mapped = f(row.asDict(recursive=True))
                if not mapped:
                    raise ValueError("User-specified function returned None instead of "
                                     "DynamicRecord")
                return dict(mapped)
            except Exception as exc:  # noqa: BLE001 - Glue's error records
                return exc

        def shape(row: Any) -> str | None:  # the schema Spark infers for the new record
            from pyspark.sql import Row
            from pyspark.sql.types import _infer_schema

            found = outcome(row)
            return None if isinstance(found, BaseException) else _infer_schema(
                Row(**found)).json()

        source = self._df
        spark = source.sparkSession
        errors = _error_records(source, outcome, _call_site(), info)
        shapes = [] if not source.columns else [
            StructType.fromJson(json.loads(found.shape)) for found in source.select(
                _udf(shape, "string")(_record(source)).alias("shape")).distinct().collect()
            if found.shape is not None]
        if not shapes:
            return self._with(spark.createDataFrame([], StructType([])), errors)
        schema = functools.reduce(_merge_type, shapes)

        def record(row: Any) -> dict[str, Any] | None:
            found = outcome(row)
            return None if isinstance(found, BaseException) else found

        mapped = source.select(_udf(record, schema)(_record(source)).alias("record"))
        return self._with(mapped.where("record IS NOT NULL").select("record.*"), errors)

    def union(self, other_frame: DynamicFrame, transformation_ctx: str = "",
              **_: Any) -> DynamicFrame:
        """The records of both frames; a field one frame lacks is null in its records."""
        return self._with(self._df.unionByName(other_frame.toDF(), allowMissingColumns=True),
                          *other_frame._errors)

    def drop_null_fields(self, transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Without the top-level fields that are null in every record."""
        from pyspark.sql import functions as F

        if not self._df.columns:
            return self
        counts = self._df.select(*[F.count(_column(c)).alias(c)
                                   for c in self._df.columns]).first()
        assert counts is not None  # an aggregate without grouping has exactly one row
        return self._with(self._df.drop(*[c for c in self._df.columns if not counts[c]]))

    def unnest(self, transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Every field of a struct as a top-level field named by its path (``a.b``);
        arrays stay as they are (Glue Studio's ``gs_flatten``)."""
        from framework.glue.studio import flatten

        return self._with(flatten(self._df))

    def split_fields(self, paths: Sequence[str], name1: str, name2: str,
                     transformation_ctx: str = "", **_: Any) -> DynamicFrameCollection:
        """``name1``: the fields at ``paths``; ``name2``: the others."""
        chosen = [p for p in paths if _exists(self._df, p)]
        rest = self.drop_fields(chosen)
        return DynamicFrameCollection({name1: self.select_fields(chosen), name2: rest},
                                      self.glue_ctx)

    def split_rows(self, comparison_dict: Mapping[str, Mapping[str, Any]], name1: str,
                   name2: str, transformation_ctx: str = "", **_: Any
                   ) -> DynamicFrameCollection:
        """``name1``: the records meeting every comparison (``{"age": {">": 10}}``; the
        operators <, >, =, !=, <=, >=); ``name2``: the others."""
        from pyspark.sql import functions as F

        operators = {"<": "__lt__", ">": "__gt__", "=": "__eq__", "!=": "__ne__",
                     "<=": "__le__", ">=": "__ge__"}
        condition = F.lit(True)
        for path, comparisons in comparison_dict.items():
            for operator, value in comparisons.items():
                if operator not in operators:
                    raise GlueUnsupportedError(
                        f"split_rows({path!r}: {operator!r})",
                        f"use one of {', '.join(operators)}")
                if _exists(self._df, path):
                    column = F.col(_column(path))
                    condition = condition & getattr(column, operators[operator])(value)
                else:
                    condition = F.lit(False)
        matched = F.coalesce(condition, F.lit(False))
        return DynamicFrameCollection({name1: self._with(self._df.filter(matched)),
                                       name2: self._with(self._df.filter(~matched))},
                                      self.glue_ctx)

    def unbox(self, path: str, format: str, transformation_ctx: str = "", **options: Any
              ) -> DynamicFrame:
        """The JSON or CSV text in the field at ``path`` as a struct in its place. JSON's
        schema is read from the values; CSV's fields are ``col0``, ``col1``, ... (text), as
        many as the longest value has, unless ``withSchema`` (``StructType.json()``) gives
        them; ``separator``, ``escaper`` and ``quoteChar`` as for a CSV read."""
        import json

        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        kind = format.lower()
        csv_options = {"separator": "sep", "escaper": "escape", "quoteChar": "quote"}
        allowed = {"withSchema", *csv_options} if kind == "csv" else {"withSchema"}
        if kind not in ("json", "csv") or set(options) - allowed - {"info", "stageThreshold",
                                                                      "totalThreshold"}:
            raise GlueUnsupportedError(
                f"unbox({path!r}, format={format!r}, {', '.join(options)})",
                "unbox JSON or CSV (separator, escaper, quoteChar, withSchema), or parse "
                "the text with Spark on toDF()")
        if not _exists(self._df, path):
            return self
        value = F.col(_column(path))
        texts = self._df.select(value.alias("text")).where(value.isNotNull())
        reader_options = {csv_options[k]: str(v) for k, v in options.items()
                          if k in csv_options}
        if options.get("withSchema"):
            schema = StructType.fromJson(json.loads(options["withSchema"]))
        elif kind == "json":
            schema = json_schema(texts)
        else:
            widest = F.max(_udf(_csv_width(options), "int")("text"))
            widest_row = texts.select(widest).first()  # an aggregate: one row
            width = (widest_row[0] if widest_row else 0) or 0
            schema = StructType([StructField(f"col{i}", StringType()) for i in range(width)])
        if not schema.fields:
            return self
        ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
        parsed = F.from_json(value, schema) if kind == "json" else F.from_csv(
            value, F.lit(ddl), reader_options)
        return self._with(_with_field(self._df, path, parsed))

    def spigot(self, path: str, options: Mapping[str, Any] | None = None,
               transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Write a sample of the records to ``path`` as JSON, to look at (the first
        ``topk``, default 100, or each with probability ``prob``); returns this frame.
        The sample is not part of the run's exactly-once commit."""
        options = dict(options or {})
        sample = (self._df.sample(fraction=float(options["prob"])) if "prob" in options
                  else self._df.limit(int(options.get("topk", 100))))
        sample.write.mode("overwrite").json(path)
        return self

    def mergeDynamicFrame(self, stage_dynamic_frame: DynamicFrame,  # noqa: N802
                          primary_keys: Sequence[str], transformation_ctx: str = "",
                          **_: Any) -> DynamicFrame:
        """This frame's records, those with the keys of a ``stage_dynamic_frame`` record
        replaced by the staging frame's (duplicates are kept, as in Glue)."""
        stage = stage_dynamic_frame.toDF()
        keys = list(primary_keys)
        kept = self._df.join(stage.select(*keys).distinct(), keys, "left_anti")
        return self._with(kept.unionByName(stage, allowMissingColumns=True),
                          *stage_dynamic_frame._errors)

    def repartition(self, num_partitions: int, transformation_ctx: str = "",
                    **_: Any) -> DynamicFrame:
        return self._with(self._df.repartition(num_partitions))

    def coalesce(self, num_partitions: int, shuffle: bool = False,
                 transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return self._with(self._df.repartition(num_partitions) if shuffle
                          else self._df.coalesce(num_partitions))

    def resolveChoice(self, specs: Sequence[tuple[str, str]] | None = None,  # noqa: N802
                      choice: str = "", database: str | None = None,
                      table_name: str | None = None, transformation_ctx: str = "",
                      **_: Any) -> DynamicFrame:
        """``specs=[("col", "cast:long")]`` for the fields named, or ``choice=...`` for
        every choice field (a catalog table's column some of whose values are not of its
        type, ``framework.glue.choice``): ``cast:TYPE`` and ``project:TYPE`` (a value not
        of the type becomes null), ``make_cols`` (``col_long``, ``col_string``),
        ``make_struct`` (a struct of both), ``match_catalog`` (cast to the type the
        catalog table ``database.table_name`` declares). A field that is not a choice is
        cast by ``cast``/``project`` and left as it is by the others, as in Glue."""
        from framework.glue.choice import choice_of

        if bool(specs) == bool(choice):  # Glue's own messages
            raise GlueUnsupportedError(
                "resolveChoice", "Parameter specs and option are both specified, choose one."
                if specs else "Parameter specs and option are both missing, add one.")
        fields = {f.name.lower(): f for f in self._df.schema.fields}
        pairs = list(specs) if specs else [(f.name, choice) for f in fields.values()
                                           if choice_of(f)]
        df = self._df
        for path, action in pairs:
            kind, _colon, type_name = action.partition(":")
            kind = kind.strip().lower()
            if kind == "match_catalog":
                declared = self._catalog_type(path, database, table_name)
                kind, type_name = ("cast", declared) if declared else ("keep", "")
            if kind in ("make_cols", "make_struct") and not type_name:
                df = _made(df, path, kind)
            elif kind in ("cast", "project"):
                if _exists(df, path):
                    df = _with_field(df, path, try_cast(_column(path), _spark_type(
                        type_name, "resolveChoice")))
            elif kind != "keep":
                raise GlueUnsupportedError(
                    f"resolveChoice({path!r}, {action!r})",
                    "cast:TYPE, project:TYPE, make_cols, make_struct or match_catalog")
        return self._with(df)

    def _catalog_type(self, path: str, database: str | None, table_name: str | None
                      ) -> str | None:
        """The type catalog table ``database.table_name`` declares for ``path``."""
        from framework.glue.catalog import catalog_columns
        from framework.glue.choice import catalog_type

        if not database or not table_name:
            raise GlueUnsupportedError("resolveChoice(choice='match_catalog')",
                                       "give database= and table_name= of the catalog table")
        return catalog_type(catalog_columns(database, table_name), path)

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

    def _with(self, df: DataFrame, *errors: Callable[[], DataFrame]) -> DynamicFrame:
        return DynamicFrame(df, self.glue_ctx, self.name, errors=self._errors + errors,
                            stage_errors=len(errors))


class DynamicFrameCollection(GlueApi):
    """Named DynamicFrames (what Relationalize returns)."""

    glue_name = "DynamicFrameCollection"

    def __init__(self, dynamic_frames: Mapping[str, DynamicFrame], glue_ctx: Any = None):
        self._frames, self.glue_ctx = dict(dynamic_frames), glue_ctx

    def keys(self) -> list[str]:
        return list(self._frames)

    def values(self) -> list[DynamicFrame]:
        return list(self._frames.values())

    def items(self) -> list[tuple[str, DynamicFrame]]:
        return list(self._frames.items())

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


def _parts(path: str) -> list[str]:
    """A Glue field path's names: ``a.b`` is field ``b`` of ``a``; a name in backticks
    may hold dots."""
    parts, current, quoted = [], "", False
    for char in path:
        if char == "`":
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _column(path: str) -> str:
    """A Glue field path as a Spark column reference (``a.b`` is a nested field)."""
    return ".".join(f"`{part}`" for part in _parts(path))


def _exists(df: DataFrame, path: str) -> bool:
    """Whether ``df`` has a field at ``path`` (names compared as Spark does, ignoring case)."""
    from pyspark.sql.types import StructType

    kind: Any = df.schema
    for part in _parts(path):
        if not isinstance(kind, StructType):
            return False
        found = [f for f in kind.fields if f.name.lower() == part.lower()]
        if not found:
            return False
        kind = found[0].dataType
    return True


def _without(df: DataFrame, path: str) -> DataFrame:
    """``df`` without the (existing) field at ``path``."""
    from pyspark.sql import functions as F

    top, *rest = _parts(path)
    if not rest:
        return df.drop(top)
    return df.withColumn(top, F.col(f"`{top}`").dropFields(".".join(f"`{p}`" for p in rest)))


def _with_field(df: DataFrame, path: str, value: Column) -> DataFrame:
    """``df`` with ``value`` at ``path``, in an existing struct, or a new top-level one."""
    from pyspark.sql import functions as F

    top, *rest = _parts(path)
    if not rest:
        return df.withColumn(top, value)
    if _exists(df, top):
        return df.withColumn(top, F.col(f"`{top}`").withField(
            ".".join(f"`{p}`" for p in rest), value))
    nested = value
    for name in reversed(rest):
        nested = F.struct(nested.alias(name))
    return df.withColumn(top, nested)


def _tree(placed: Iterable[tuple[str, Column]]) -> dict[str, Any]:
    """Columns placed at paths as a tree of names (a branch is a struct to build); a path
    inside one placed whole is already there."""
    tree: dict[str, Any] = {}
    for path, value in placed:
        node = tree
        *parents, leaf = _parts(path)
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[leaf] = value
    return tree


def _structs(tree: Mapping[str, Any]) -> list[Column]:
    """Columns from a tree of names (a leaf is a Column, a branch a struct)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    return [node.alias(name) if isinstance(node, Column) else
            F.struct(*_structs(node)).alias(name) for name, node in tree.items()]


def _shared_fields_apart(joined: DataFrame, left: DataFrame, right: DataFrame,
                        keys1: Sequence[str], keys2: Sequence[str]) -> DataFrame:
    """The ``joined`` columns as Glue's join names them: each of ``right``'s top-level
    fields that ``left`` also has (names compared ignoring case, as Spark does) becomes
    ``.name`` in the records where both sides have it, and ``name`` where ``left``'s is
    null; a ``.name`` that no record needs is left out. Fields of different types are
    kept apart whole (``left``'s ``name``, ``right``'s ``.name``)."""
    from pyspark.sql import functions as F

    types = {f.name.lower(): f.dataType for f in left.schema.fields}
    shared = [f for f in right.schema.fields if f.name.lower() in types]
    if not shared:
        return joined
    key_pairs = {(a.lower(), b.lower()) for a, b in zip(keys1, keys2, strict=True)}
    merged, apart, conditional = {}, {}, {}
    for field in shared:
        mine, theirs = left[_column(field.name)], right[_column(field.name)]
        if (field.name.lower(), field.name.lower()) in key_pairs:
            apart[field.name] = theirs  # equal and not null in every joined record
        elif types[field.name.lower()] != field.dataType:
            apart[field.name] = theirs
        else:
            merged[field.name.lower()] = F.coalesce(mine, theirs)
            conditional[field.name] = F.when(mine.isNotNull(), theirs)
    needed = set()
    if conditional:
        [row] = joined.agg(*(F.count(value).alias(str(i)) for i, value in
                             enumerate(conditional.values()))).collect()
        needed = {name for i, name in enumerate(conditional) if row[i]}
    columns = [merged[f.name.lower()].alias(f.name) if f.name.lower() in merged
               else left[_column(f.name)] for f in left.schema.fields]
    for field in right.schema.fields:
        if field.name in apart:
            columns.append(apart[field.name].alias(f".{field.name}"))
        elif field.name in conditional:
            if field.name in needed:
                columns.append(conditional[field.name].alias(f".{field.name}"))
        else:
            columns.append(right[_column(field.name)])
    return joined.select(*columns)


def _made(df: DataFrame, name: str, kind: str) -> DataFrame:
    """``df`` with its choice column ``name`` made into columns (``make_cols``) or a
    struct (``make_struct``); any other column as it is."""
    from framework.glue.choice import choice_of, make_cols, make_struct

    field = next((f for f in df.schema.fields if f.name.lower() == name.lower()), None)
    if field is None or not choice_of(field):
        return df
    columns: list[Any] = []
    for other in df.schema.fields:
        if other.name != field.name:
            columns.append(_column(other.name))
        elif kind == "make_cols":
            columns += make_cols(field)
        else:
            columns.append(make_struct(field))
    return df.select(*columns)


def _call_site() -> str:
    """Where the script called the transform (its innermost frame outside deltamark), as
    Glue's error records name it."""
    import os
    import traceback

    here = os.path.dirname(os.path.dirname(__file__))
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(here):
            return f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n' \
                   f"    {frame.line or ''}"
    return ""


def _error_records(source: DataFrame, outcome: Callable[[Any], Any], site: str,
                   info: str) -> Callable[[], DataFrame]:
    """The error records of a step over ``source``: its rows for which ``outcome`` gives
    an exception (computed when asked for)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    text = StringType()
    error = StructType([
        StructField("callsite", StructType([StructField("site", text),
                                            StructField("info", text)])),
        StructField("msg", text), StructField("stackTrace", text),
        StructField("input", text), StructField("bytesread", LongType()),
        StructField("source", text), StructField("dynamicRecord", source.schema)])

    def records(row: Any) -> list[Any]:
        import traceback

        exc = outcome(row)
        if not isinstance(exc, BaseException):
            return []
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return [((site, info), f"{type(exc).__name__}: {exc}", trace, "", 0, "", row)]

    if not source.columns:
        return lambda: source.sparkSession.createDataFrame(
            [], StructType([StructField("error", error)]))
    found = _udf(records, ArrayType(error))
    return lambda: source.select(F.explode(found(_record(source))).alias("error"))


def _udf(function: Callable[[Any], Any], returns: Any) -> Any:
    """``function`` as a plain Python UDF (rows in as pickled Rows, as an RDD's functions
    get them; ``useArrow=False`` also spares Spark Connect's client from guessing a
    pandas UDF from type hints, which it warns about) returning ``returns``."""
    from pyspark.sql import functions as F

    return F.udf(function, returns, useArrow=False)


def _record(df: DataFrame) -> Column:
    """Each row of ``df`` as one struct, which the function of a Python UDF gets as a Row.
    Spark runs that function in its Python workers (on Spark Connect, the server's, where
    deltamark is not installed): it must not call deltamark's module-level functions,
    which cloudpickle would send by name."""
    from pyspark.sql import functions as F

    return F.struct(*(named_column(name) for name in df.columns))


def _union_errors(first: DataFrame, second: DataFrame) -> DataFrame:
    """Error records of two steps together (their records' fields may differ)."""
    from pyspark.sql import functions as F

    if first.schema == second.schema:
        return first.unionByName(second)
    as_text = [F.col("error").withField("dynamicRecord", F.to_json("error.dynamicRecord"))
               .alias("error")]
    return first.select(*as_text).unionByName(second.select(*as_text))


def _csv_width(options: Mapping[str, Any]) -> Callable[[str], int]:
    """How many fields a CSV text has, read as ``from_csv`` reads it with Glue's
    ``options`` (separator, escaper, quoteChar)."""
    import csv

    separator = str(options.get("separator", ","))
    quote = str(options.get("quoteChar", '"'))
    escape = str(options.get("escaper", "\\"))

    def width(text: str) -> int:
        return len(next(csv.reader([text], delimiter=separator, quotechar=quote or None,
                                   escapechar=escape or None), []))

    return width


def _list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _spark_type(glue_type: str, call: str) -> str:
    """A Glue type name as a Spark SQL type (``decimal(10,2)`` as it is)."""
    name = glue_type.strip().lower()
    if name in _TYPES:
        return _TYPES[name]
    if name.startswith("decimal("):
        return name
    if name.startswith(("varchar(", "char(")):
        return "string"
    raise GlueUnsupportedError(f"{call}(..., {glue_type!r})",
                               f"use one of {', '.join(sorted(_TYPES))}, decimal(P,S), "
                               "varchar(N), a nested type (array, struct, map) or choice")
