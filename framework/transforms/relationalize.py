"""Relationalize: nested rows into flat tables joined by keys, with Glue's layout.

    tables = relationalize(orders, "orders", key_columns=["order_id"])
    for name, table in tables.items():
        ctx.write_delta(table, f"{lake}/{name}", merge_schema=True)

The layout (AWS Glue's Relationalize):

- The root table is named by the caller. Struct fields become dotted columns:
  ``customer.name``.
- Each array becomes a child table named ``<parent>_<path>``, where ``path`` is the array's
  dotted path within the parent's rows: ``orders_lines``, ``orders_customer.phones``.
  In the parent, the array's column holds a join key; the child table has ``id`` (that
  key), ``index`` (the position in the array) and the element: ``<path>.val`` for a
  primitive, ``<path>.val.<field>`` for each field of a struct.
- Arrays inside array elements recurse, named after the child table and the path inside
  the element: ``orders_lines_taxes`` for ``lines[].taxes``, ``<child>_val`` for an array
  of arrays.
- Maps become child tables like arrays, with ``key`` in place of ``index``.
- A NULL array or map leaves a NULL key in the parent; an empty one has a key and no
  child rows. A NULL struct leaves its columns NULL.
- A ``.`` or ``%`` inside a field name is written ``%2E`` / ``%25`` in column names, so
  dotted paths stay unambiguous; table names keep it as it is, as Glue's frame names do
  (``root_.links`` for a field ``.links``): a name that two tables would share fails.

Unlike Glue, the keys are deterministic: a hash of the row's ``key_columns`` (or of the
whole row) and the array's path, so a retried or replayed run produces the same keys and
no duplicate child rows. Key columns must identify rows: rows with the same key values
share their child keys. Without key columns, identical rows share their child rows (kept
once; this costs a shuffle per child table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from framework.errors import TransformError
from framework.spark.session import named_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["rejoin", "relationalize"]

_ROW = "__deltamark_row"  # a row's identity, from which its arrays' keys derive
_VALUE = "__deltamark_value"
_FOLD_ID, _FOLD_VALUE = "__deltamark_fold_id", "__deltamark_fold_value"
_LINK_COLUMNS = ("id", "index", "key")


def relationalize(df: DataFrame, root_name: str, *, key_columns: Sequence[str] = ()
                  ) -> dict[str, DataFrame]:
    """Split ``df``'s nested rows into flat tables (see the module docstring).

    Args:
        df: rows with structs, arrays and maps at any depth.
        root_name: the root table's name, and the prefix of every child table's name.
        key_columns: columns that identify a row; the keys of its arrays are derived from
            them. Default: the whole row (slower, and identical rows share keys).

    Returns:
        Table name -> DataFrame, the root first, each parent before its children.

    Raises:
        TransformError: an unknown key column, or two tables with the same name.
    """
    from pyspark.sql import functions as F

    if missing := [c for c in key_columns if c not in df.columns]:
        raise TransformError(root_name, f"key column(s) {missing} are not in the data "
                             f"(columns: {', '.join(df.columns)})")
    columns = [named_column(c) for c in df.columns]
    identity = [named_column(c) for c in key_columns] or [F.to_json(F.struct(*columns))]
    frame = df.select(F.xxhash64(F.lit(root_name), *identity).alias(_ROW), *columns)
    fields = [_Field(_escape(f.name), named_column(f.name), f.dataType) for f in df.schema.fields]
    tables: dict[str, DataFrame] = {}
    _split(tables, root_name, frame, fields, links=(), prefix="",
           identical_rows_possible=not key_columns)
    return tables


def rejoin(tables: Mapping[str, DataFrame], root_name: str) -> DataFrame:
    """Rebuild the nested rows from ``relationalize``'s tables: the inverse, except that a
    struct whose fields are all NULL comes back as NULL.

    Raises:
        TransformError: ``root_name`` is not among the tables.
    """
    if root_name not in tables:
        raise TransformError(root_name, f"no table named {root_name!r} (tables: "
                             f"{', '.join(tables)})")
    return _nest(tables, root_name, prefix="")


@dataclass(frozen=True)
class _Field:
    path: str  # the output column name
    column: Column
    type: DataType


def _split(tables: dict[str, DataFrame], name: str, frame: DataFrame,
           fields: Sequence[_Field], *, links: Sequence[str], prefix: str,
           identical_rows_possible: bool) -> None:
    """Emit table ``name`` (its ``links`` columns, then ``fields`` flattened) and, for each
    array or map among the fields, its child table. Identical root rows share their keys,
    so their children are kept once."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType

    if name in tables:
        raise TransformError(name, "two tables would get this name; rename the field that "
                             "produces one of them")
    columns: list[Column] = [F.col(link) for link in links]
    nested: list[_Field] = []
    for field in _leaves(fields):
        if isinstance(field.type, ArrayType | MapType):
            key = F.when(field.column.isNotNull(), _array_key(field.path))
            columns.append(key.alias(field.path))
            nested.append(field)
        else:
            columns.append(field.column.alias(field.path))
    table = frame.select(*columns)
    tables[name] = table.dropDuplicates(list(links)) if links and identical_rows_possible \
        else table

    for field in nested:
        child = _child_name(name, field.path, prefix)
        if isinstance(field.type, ArrayType):
            position, element_type = "index", field.type.elementType
            exploded = F.posexplode(field.column).alias("index", _VALUE)
        else:
            assert isinstance(field.type, MapType)  # nested holds arrays and maps only
            position, element_type = "key", field.type.valueType
            exploded = F.explode(field.column).alias("key", _VALUE)
        rows = (frame.select(_array_key(field.path).alias("id"), exploded)
                .withColumn(_ROW, F.xxhash64("id", position)))
        element = f"{field.path}.val"
        _split(tables, child, rows, [_Field(element, F.col(_VALUE), element_type)],
               links=("id", position), prefix=element,
               identical_rows_possible=identical_rows_possible)


def _child_name(parent: str, path: str, prefix: str) -> str:
    """``<parent>_<path relative to the parent's element>`` (its field names unescaped);
    ``<parent>_val`` for an array whose elements are arrays."""
    if path == prefix:
        return f"{parent}_val"
    return f"{parent}_{_unescape(path[len(prefix) + 1:] if prefix else path)}"


def _leaves(fields: Sequence[_Field]) -> list[_Field]:
    """Struct fields flattened into dotted paths, in schema order."""
    from pyspark.sql.types import StructType

    flat: list[_Field] = []
    for field in fields:
        if isinstance(field.type, StructType):
            flat += _leaves([_Field(f"{field.path}.{_escape(f.name)}",
                                    field.column.getField(f.name), f.dataType)
                             for f in field.type.fields])
        else:
            flat.append(field)
    return flat


def _array_key(path: str) -> Column:
    from pyspark.sql import functions as F

    return F.xxhash64(F.col(_ROW), F.lit(path))


def _nest(tables: Mapping[str, DataFrame], name: str, *, prefix: str) -> DataFrame:
    """Table ``name`` with its children folded back in: its link columns, then the value
    under ``prefix`` (the root: every column) rebuilt as nested columns."""
    from pyspark.sql import functions as F

    table = tables[name]
    links = [c for c in table.columns if prefix and c in _LINK_COLUMNS]
    for column in table.columns:
        child = _child_name(name, column, prefix)
        if column in links or child not in tables:
            continue
        folded = _fold(tables, child, prefix=f"{column}.val")
        joined = table.join(folded, named_column(column) == F.col(_FOLD_ID), "left")
        value = (F.when(named_column(column).isNull(), None)
                 .otherwise(F.coalesce(F.col(_FOLD_VALUE), _empty_like(folded))))
        table = joined.select(*[value.alias(c) if c == column else named_column(c)
                                for c in table.columns])
    values = [c for c in table.columns if c not in links]
    return table.select(*[F.col(link) for link in links], *_rebuild(values, prefix))


def _fold(tables: Mapping[str, DataFrame], name: str, *, prefix: str) -> DataFrame:
    """Child table ``name`` collected back into one array (or map) per ``id``."""
    from pyspark.sql import functions as F

    rows = _nest(tables, name, prefix=prefix)
    [element] = [c for c in rows.columns if c not in _LINK_COLUMNS]
    if "index" in rows.columns:  # sorted by index alone: elements may not be comparable
        entries = F.array_sort(F.collect_list(F.struct("index", named_column(element))),
                               lambda a, b: a["index"] - b["index"])
        value = F.transform(entries, lambda entry: entry[element])
    else:
        value = F.map_from_entries(F.collect_list(F.struct("key", named_column(element))))
    return rows.groupBy(F.col("id").alias(_FOLD_ID)).agg(value.alias(_FOLD_VALUE))


def _empty_like(folded: DataFrame) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    kind = folded.schema[_FOLD_VALUE].dataType
    empty = F.array() if isinstance(kind, ArrayType) else F.create_map()
    return empty.cast(kind)


#: dotted column names as a tree: each segment's fields, down to the full names at its leaves
_Tree: TypeAlias = "dict[str, _Tree | str]"


def _rebuild(columns: Sequence[str], prefix: str) -> list[Column]:
    """Dotted columns under ``prefix`` as nested struct columns (one column when the value
    is not a struct), named by their unescaped last segment."""
    from pyspark.sql import functions as F

    if prefix and columns == [prefix]:
        return [named_column(prefix).alias(prefix)]
    tree: _Tree = {}
    for column in columns:
        relative = column[len(prefix) + 1:] if prefix else column
        node = tree
        *parents, leaf = relative.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            assert isinstance(child, dict), column  # a struct's fields, never a leaf too
            node = child
        node[leaf] = column

    def build(node: _Tree) -> list[Column]:
        built = []
        for part, child in node.items():
            if isinstance(child, str):
                built.append(named_column(child).alias(_unescape(part)))
            else:
                struct = F.struct(*build(child))
                all_null = _all_null(_leaf_columns(child))
                built.append(F.when(all_null, None).otherwise(struct).alias(_unescape(part)))
        return built

    rebuilt = build(tree)
    if not prefix:
        return rebuilt
    element = F.struct(*rebuilt)  # an element: one struct value, NULL when all fields are
    return [F.when(_all_null(columns), None).otherwise(element).alias(prefix)]


def _all_null(columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for column in columns:
        condition = condition & named_column(column).isNull()
    return condition


def _leaf_columns(node: _Tree) -> list[str]:
    leaves: list[str] = []
    for child in node.values():
        leaves += [child] if isinstance(child, str) else _leaf_columns(child)
    return leaves


def _escape(name: str) -> str:
    return name.replace("%", "%25").replace(".", "%2E")


def _unescape(name: str) -> str:
    return name.replace("%2E", ".").replace("%25", "%")


