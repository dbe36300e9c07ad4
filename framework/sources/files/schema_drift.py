"""Schema drift in file sources: a schema per context, evolved run by run, read by name.

A file context keeps the schema of what it has read in its bookmark (``FileState.schema``),
committed with the bookmark, so a rewind brings back the schema of that run. A run reads
its files in groups of one layout each (Parquet, ORC and Avro files by their own schema,
CSV files by their header), then brings every group to the context's schema *by name*:

- a field the schema lacks is added (``add_new_columns``, nested fields and fields of
  structs in arrays and maps included), left out and named (``none``), rescued
  (``rescue``), or refused with the files that hold it (``fail_on_new_columns``);
- a type that safely widens the stored one (int -> long, float -> double, int -> double,
  decimal precision) widens it (``add_new_columns`` only); any value converts to a string
  column as its text; a value that does not fit its column's type otherwise goes to the
  rescued-data column, as does a field whose name differs from the schema's only in case
  (CSV headers excepted: they match whatever their case).

The rescued-data column (``_rescued_data`` by default) holds, for a row with something
rescued, JSON text of the rescued fields (dotted paths for nested ones) with the file's
path and the run that read it; it is NULL on clean rows. A row is never dropped and a
value never becomes NULL for not fitting. Auto Loader's ``schemaEvolutionMode`` values
``addNewColumns``, ``none``, ``rescue`` and ``failOnNewColumns`` are these four modes.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from framework.sources.files.listed_reads import ListedFile, read_each
from framework.spark.session import quoted
from framework.spark.types import Conversion, Misfit, literal, same, sql_type, widens
from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["EVOLUTION_MODES", "RESCUED_COLUMN", "Drift", "EvolutionMode", "FileGroup", "Hint",
           "case_clashes", "conform", "evolve", "file_groups", "first_schema", "from_json",
           "header_schema", "hinted", "parse_hints", "rescue_counts", "to_json"]

EvolutionMode = Literal["add_new_columns", "rescue", "fail_on_new_columns", "none"]
EVOLUTION_MODES: tuple[str, ...] = ("add_new_columns", "rescue", "fail_on_new_columns",
                                    "none")
RESCUED_COLUMN = "_rescued_data"
#: what is read of a CSV file to find its header
HEADER_BYTES = 1 << 16


# --- the stored schema ----------------------------------------------------------------


def to_json(schema: StructType) -> dict[str, Any]:
    """``schema`` as the JSON object a bookmark stores."""
    found: dict[str, Any] = schema.jsonValue()
    return found


def from_json(data: Mapping[str, Any]) -> StructType:
    """The schema a bookmark stores (``to_json``)."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(dict(data))


@dataclass(frozen=True)
class Drift:
    """What one run's files bring against the stored schema: ``schema``, the context's
    schema once the run has read them; ``changes``, each change in words (``+ coupon
    string``, ``amount int -> bigint``); ``new``, the fields the schema lacks that the
    mode keeps out (dotted paths)."""

    schema: StructType
    changes: tuple[str, ...] = ()
    new: tuple[str, ...] = ()


def first_schema(schemas: Sequence[StructType]) -> StructType:
    """One schema for the files of a context's first run: every field of every group, a
    field of two types in the type both widen to (a string where none is)."""
    from pyspark.sql.types import StructType

    found: DataType = StructType([])
    for schema in schemas:
        found = _union(found, schema)
    assert isinstance(found, StructType)
    return found


def evolve(stored: StructType, incoming: StructType, mode: EvolutionMode) -> Drift:
    """The stored schema after a run whose files have the schema ``incoming``."""
    from pyspark.sql.types import StructType

    changes: list[str] = []
    new: list[str] = []
    schema = _evolved(stored, incoming, mode, "", changes, new)
    assert isinstance(schema, StructType)
    return Drift(schema, tuple(changes), tuple(new))


def _evolved(stored: DataType, incoming: DataType, mode: EvolutionMode, path: str,
             changes: list[str], new: list[str]) -> DataType:
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(stored, StructType) and isinstance(incoming, StructType):
        fields = list(stored.fields)
        names = {f.name: i for i, f in enumerate(fields)}
        lowered = {f.name.lower() for f in fields}
        for given in incoming.fields:
            where = f"{path}{given.name}"
            if given.name in names:
                index = names[given.name]
                kept = fields[index]
                fields[index] = StructField(kept.name, _evolved(
                    kept.dataType, given.dataType, mode, f"{where}.", changes, new), True,
                    kept.metadata)
            elif given.name.lower() in lowered:
                continue  # only the case differs: rescued
            elif mode == "add_new_columns":
                fields.append(StructField(given.name, given.dataType, True))
                lowered.add(given.name.lower())  # another case of it in the files: rescued
                changes.append(f"+ {where} {given.dataType.simpleString()}")
            else:
                new.append(where)
        return StructType(fields)
    if isinstance(stored, ArrayType) and isinstance(incoming, ArrayType):
        return ArrayType(_evolved(stored.elementType, incoming.elementType, mode,
                                  path.removesuffix(".") + "[].", changes, new), True)
    if isinstance(stored, MapType) and isinstance(incoming, MapType) and \
            stored.keyType == incoming.keyType:
        return MapType(stored.keyType, _evolved(stored.valueType, incoming.valueType, mode,
                                                path.removesuffix(".") + "{}.", changes,
                                                new), True)
    if mode == "add_new_columns" and stored != incoming and widens(stored, incoming):
        changes.append(f"{path.removesuffix('.')} {stored.simpleString()} -> "
                       f"{incoming.simpleString()}")
        return incoming
    return stored


def _union(one: DataType, other: DataType) -> DataType:
    from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType

    if isinstance(one, StructType) and isinstance(other, StructType):
        fields = {f.name: f for f in one.fields}
        lowered = {name.lower() for name in fields}
        for given in other.fields:
            if given.name in fields:
                kept = fields[given.name]
                fields[given.name] = StructField(kept.name, _union(kept.dataType,
                                                                   given.dataType), True)
            elif given.name.lower() not in lowered:  # else only the case differs: rescued
                fields[given.name] = StructField(given.name, given.dataType, True)
                lowered.add(given.name.lower())
        return StructType(list(fields.values()))
    if isinstance(one, ArrayType) and isinstance(other, ArrayType):
        return ArrayType(_union(one.elementType, other.elementType), True)
    if isinstance(one, MapType) and isinstance(other, MapType) and one.keyType == other.keyType:
        return MapType(one.keyType, _union(one.valueType, other.valueType), True)
    if widens(one, other):
        return other
    if widens(other, one):
        return one
    return StringType()


def case_clashes(schema: StructType) -> bool:
    """Whether two fields of ``schema`` (or of a struct in it) differ only in case."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    def clashes(data_type: DataType) -> bool:
        if isinstance(data_type, StructType):
            names = [f.name.lower() for f in data_type.fields]
            return len(set(names)) < len(names) or any(clashes(f.dataType)
                                                       for f in data_type.fields)
        if isinstance(data_type, ArrayType):
            return clashes(data_type.elementType)
        if isinstance(data_type, MapType):
            return clashes(data_type.valueType)
        return False

    return clashes(schema)


# --- schema hints ---------------------------------------------------------------------

#: a hint's column: dotted names, each plain or in backticks (`a.b` is one name)
_HINT = re.compile(r"\s*((?:`(?:[^`]|``)+`|[^\s.`]+)(?:\.(?:`(?:[^`]|``)+`|[^\s.`]+))*)"
                   r"\s+(\S.*)", re.DOTALL)


@dataclass(frozen=True)
class Hint:
    """One of ``schema_hints``: the column (a path of struct field names) and its type."""

    path: tuple[str, ...]
    data_type: DataType

    @property
    def name(self) -> str:
        return ".".join(self.path)


def parse_hints(spark: SparkSession, text: str) -> tuple[Hint, ...]:
    """``schema_hints`` (Spark DDL whose names may be dotted paths to nested fields:
    ``"amount DECIMAL(10,2), user.dob DATE"``), the types parsed by Spark.

    Raises:
        ValueError: ``text`` is not such a list, naming the part that is not.
    """
    parts = [p for p in _top_level(text, ",") if p.strip()]
    matches = [_HINT.fullmatch(p) for p in parts]
    if not parts or None in matches:
        bad = next((p.strip() for p, m in zip(parts, matches, strict=True) if m is None),
                   text)
        raise ValueError(f"schema_hints: {bad!r} is not '<column> <type>' (Spark DDL, a "
                         "nested field as parent.child)")
    paths = [tuple(name.strip("`").replace("``", "`") for name in _top_level(m[1], "."))
             for m in matches if m is not None]
    try:
        parsed = spark.createDataFrame([], ", ".join(
            f"`h{i}` {m[2]}" for i, m in enumerate(matches) if m is not None)).schema
    except Exception as exc:  # noqa: BLE001 - Spark's parse error, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"schema_hints {text!r}: {first}") from None
    return tuple(Hint(path, f.dataType) for path, f in zip(paths, parsed.fields, strict=True))


def _top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside brackets, backticks and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "`'\"":
            quote = char
        elif char in "(<":
            depth += 1
        elif char in ")>":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def hinted(schema: StructType, hints: Sequence[Hint]) -> tuple[StructType, tuple[str, ...]]:
    """``schema`` with the hinted fields' types (matched whatever their case; those it
    lacks added, with the structs they are in), and each type changed, in words.

    Raises:
        ValueError: a hint's path goes through a field that is not a struct.
    """
    changes = []
    for hint in hints:
        before = _type_at(schema, hint.path)
        schema = _with_type(schema, hint.path, hint.data_type, hint)
        if before is not None and not same(before, hint.data_type):
            changes.append(f"{hint.name} {before.simpleString()} -> "
                           f"{hint.data_type.simpleString()} (schema_hints)")
    return schema, tuple(changes)


def _named(struct: StructType, name: str) -> int | None:
    """The index of ``struct``'s field ``name``, whatever its case."""
    return next((i for i, f in enumerate(struct.fields) if f.name.lower() == name.lower()),
                None)


def _type_at(schema: DataType, path: Sequence[str]) -> DataType | None:
    from pyspark.sql.types import StructType

    if not path:
        return schema
    if isinstance(schema, StructType) and (index := _named(schema, path[0])) is not None:
        return _type_at(schema.fields[index].dataType, path[1:])
    return None


def _with_type(struct: StructType, path: Sequence[str], data_type: DataType, hint: Hint
               ) -> StructType:
    from pyspark.sql.types import StructField, StructType

    index = _named(struct, path[0])
    kept = None if index is None else struct.fields[index]
    if len(path) == 1:
        found = data_type
    elif kept is None:
        found = _with_type(StructType([]), path[1:], data_type, hint)
    elif isinstance(kept.dataType, StructType):
        found = _with_type(kept.dataType, path[1:], data_type, hint)
    else:
        parent = ".".join(hint.path[:len(hint.path) - len(path) + 1])
        raise ValueError(f"schema_hints: {hint.name}: {parent} is "
                         f"{kept.dataType.simpleString()}, not a struct (a hint names a "
                         "struct's field as parent.child)")
    fields = list(struct.fields)
    if index is None:
        fields.append(StructField(path[0], found, True))
    else:
        fields[index] = StructField(fields[index].name, found, True, fields[index].metadata)
    return StructType(fields)


# --- reading by name ------------------------------------------------------------------


@dataclass(frozen=True)
class FileGroup:
    """Files of one layout: the same schema in their footers, or the same CSV ``header``
    (None where the format has none, or no header is read)."""

    files: tuple[ListedFile, ...]
    header: tuple[str, ...] | None = None


def file_groups(format: str, files: Sequence[ListedFile], options: Mapping[str, str]
                ) -> list[FileGroup]:
    """``files`` by layout, each group in the order of its first file: Parquet, ORC and
    Avro by the schema their footers or headers declare, CSV with a header by its header
    (a file without one holds no row and is left out). JSON and XML files are one group:
    Spark merges what they hold by name."""
    lowered = {k.lower(): v for k, v in options.items()}
    if format == "csv" and str(lowered.get("header", "false")).lower() == "true":
        def key(file: ListedFile) -> object:
            return _csv_header(file, lowered)
    elif format in ("parquet", "orc", "avro"):
        def key(file: ListedFile) -> object:
            return _declared_schema(format, file)
    else:
        return [FileGroup(tuple(files))]
    keys = read_each(key, files)
    groups: dict[object, list[ListedFile]] = {}
    for file, found in zip(files, keys, strict=True):
        if found != ():
            groups.setdefault(found, []).append(file)
    return [FileGroup(tuple(members), found if format == "csv" else None)  # type: ignore[arg-type]
            for found, members in groups.items()]


def _declared_schema(format: str, file: ListedFile) -> str:
    """The schema ``file`` declares, as text (its footer's or header's).

    Raises:
        ValueError: the file is not of that format (or damaged), naming it.
    """
    try:
        return _footer_schema(format, file)
    except (OSError, ValueError, EOFError) as exc:  # pyarrow's and fastavro's complaints
        name = {"parquet": "Parquet", "orc": "ORC", "avro": "Avro"}[format]
        raise ValueError(f"{file.path} is not a {name} file, or is damaged: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                         ) from exc


def _footer_schema(format: str, file: ListedFile) -> str:
    fs, path, _ = filesystem(file.path)
    if format == "parquet":
        import pyarrow.parquet as pq

        with fs.open_input_file(path) as stream:
            return str(pq.read_schema(stream).remove_metadata())
    if format == "orc":
        import pyarrow.orc as orc

        with fs.open_input_file(path) as stream:
            return str(orc.ORCFile(stream).schema)
    try:
        import fastavro
    except ModuleNotFoundError:  # without it Avro files are read as Spark reads them
        return ""
    with fs.open_input_file(path) as stream:
        return json.dumps(fastavro.reader(stream).writer_schema, sort_keys=True)


def _csv_header(file: ListedFile, options: Mapping[str, str]) -> tuple[str, ...]:
    """The names in ``file``'s first record; () for a file with none."""
    fs, path, _ = filesystem(file.path)
    with fs.open_input_stream(path, compression="detect") as stream:
        head = stream.read(HEADER_BYTES)
    encoding = str(options.get("encoding", options.get("charset", "utf-8")))
    text = codecs.getincrementaldecoder("utf-8-sig" if encoding.lower().replace("-", "")
                                        == "utf8" else encoding)("replace").decode(head)
    reader = csv.reader(io.StringIO(text),
                        delimiter=_unescaped(options.get("sep", options.get("delimiter",
                                                                            ","))),
                        quotechar=str(options.get("quote", '"')) or None,
                        escapechar=str(options.get("escape", "\\")) or None)
    comment = options.get("comment")
    for record in reader:
        if record and not (comment and record[0].startswith(comment)):
            return tuple(name.strip() for name in record)
    return ()


def _unescaped(separator: str) -> str:
    return {"\\t": "\t", "tab": "\t"}.get(separator, separator)


def header_schema(header: Sequence[str], target: StructType | None,
                  typed: bool) -> StructType:
    """The schema a CSV group with ``header`` is read with: each column by position under
    the name it matches in ``target`` whatever its case (its own where none matches), of
    the target's type where ``typed`` (a schema the job gave), else a string."""
    from pyspark.sql.types import StringType, StructField, StructType

    known = {f.name.lower(): f for f in (target.fields if target else [])}
    fields: list[StructField] = []
    taken: set[str] = set()
    for index, name in enumerate(header):
        match = known.get(name.lower())
        named = match.name if match else (name or f"_c{index}")
        if named.lower() in taken:  # as Spark does with a header repeating a name
            named = f"{named}{index}"
        taken.add(named.lower())
        fields.append(StructField(named, match.dataType if typed and match
                                  else StringType(), True))
    return StructType(fields)


# --- bringing a group to the schema ---------------------------------------------------


def conform(df: DataFrame, target: StructType, *, keep: Sequence[str] = (),
            rescued_column: str | None, run_id: str, mode: EvolutionMode,
            unfit_fields: str | None = None) -> tuple[DataFrame, tuple[Misfit, ...]]:
    """``df`` (one group's read) with ``target``'s columns by name, then the string
    columns named in ``keep`` as they are (NULL where ``df`` has none), then
    ``rescued_column``: what of each row does not fit ``target`` (and the fields in its
    column ``unfit_fields``: an array of path and value text), as JSON text with the
    file's path and ``run_id``.

    Returns the DataFrame and what may not fit (``rescue_counts`` counts it).
    """
    from pyspark.sql.types import StructType

    given = StructType([f for f in df.schema.fields if f.name != unfit_fields])
    columns, conversion = _conversion(given, target, keep, mode)
    columns += [quoted(name) if name in given.fieldNames()
                else f"CAST(NULL AS STRING) AS {quoted(name)}" for name in keep]
    if rescued_column is not None:
        rescued = _rescued(conversion.misfits, run_id, unfit_fields)
        columns.append(f"{rescued} AS {quoted(rescued_column)}")
    return df.selectExpr(*columns), tuple(conversion.misfits)


def rescue_counts(df: DataFrame, misfits: Sequence[Misfit]) -> dict[str, int]:
    """How many values of each name in ``misfits`` did not fit in ``df`` (one job)."""
    if not misfits:
        return {}
    [row] = df.selectExpr(*[f"count_if({m.condition}) AS c{i}"
                            for i, m in enumerate(misfits)]).collect()
    found: dict[str, int] = {}
    for misfit, count in zip(misfits, row, strict=True):
        if count:
            found[misfit.name] = found.get(misfit.name, 0) + count
    return found


def _conversion(given: StructType, target: StructType, keep: Sequence[str],
                mode: EvolutionMode) -> tuple[list[str], Conversion]:
    from pyspark.sql.types import StructType

    conversion = Conversion(new_fields_misfit=mode == "rescue")
    names = given.fieldNames()
    columns = [(conversion.convert(quoted(f.name), given[f.name].dataType, f.dataType, f.name)
                if f.name in names else f"CAST(NULL AS {sql_type(f.dataType)})")
               + f" AS {quoted(f.name)}" for f in target.fields]
    kept = set(keep)
    conversion.extras("", StructType([f for f in given.fields if f.name not in kept]),
                      target, "")
    return columns, conversion


def _rescued(misfits: Sequence[Misfit], run_id: str, unfit_fields: str | None) -> str:
    if not misfits and unfit_fields is None:
        return "CAST(NULL AS STRING)"
    parts = "".join(f"{literal(m.name)}, CASE WHEN {m.condition} THEN {m.value} END, "
                    for m in misfits)
    rescued = (f"to_json(named_struct({parts}'_file_path', _metadata.file_path, "
               f"'_run_id', {literal(run_id)}))")
    conditions = [f"({m.condition})" for m in misfits]
    if unfit_fields is not None:  # spliced in before the others: {unfit..., others...}
        unfit = f"to_json(map_from_entries({quoted(unfit_fields)}))"
        rescued = (f"CASE WHEN size({quoted(unfit_fields)}) > 0 THEN concat(substr("
                   f"{unfit}, 1, length({unfit}) - 1), ',', substr({rescued}, 2)) "
                   f"ELSE {rescued} END")
        conditions.append(f"size({quoted(unfit_fields)}) > 0")
    return f"CASE WHEN {' OR '.join(conditions)} THEN {rescued} END"
