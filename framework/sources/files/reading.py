"""A plan read with Spark: by column name, as the context's schema evolves, with the
rescued-data column and the bad-records policy.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from framework.common import humanize
from framework.sources.files import json_schema, malformed, schema_drift
from framework.sources.files.listed_reads import ListedFile, read_listed
from framework.sources.files.model import FilePlan, FileSource
from framework.spark.lines import require
from framework.spark.session import is_connect, temporary_conf
from framework.spark.types import CHOICE
from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


__all__ = ["FilesRead", "first_malformed", "parse_exclusions", "read_files"]


@dataclass(frozen=True)
class FilesRead:
    """A run's read of its planned files: the rows, and what they did to the context's
    schema (``drift``: None where the job gave the schema, or the format has none)."""

    df: DataFrame
    drift: schema_drift.Drift | None = None
    #: values that did not fit, by column (dotted paths), in the rescued-data column
    rescued: Mapping[str, int] = field(default_factory=dict)
    #: the rescued-data column the rows carry (None: none)
    rescued_column: str | None = None


def read_files(spark: SparkSession, source: FileSource, plan: FilePlan, *,
               run_id: str = "") -> FilesRead:
    """The planned files as one DataFrame, every file read by column name (Hive-style
    ``key=value`` directories become columns), with the context's schema
    (``framework.sources.files.schema_drift``). With no files: an empty DataFrame of the
    context's schema (or ``source.schema``; no columns without either).

    Raises:
        ValueError: Spark would not read every planned file (a reader option filters
            some, or one is outside the ``key=value`` directories of the others); new
            columns under ``fail_on_new_columns``; a value that does not fit the job's
            schema with no rescued-data column.
    """
    from pyspark.sql.types import StructType

    # a schema with no field (only empty files read so far) is inferred again
    stored = (schema_drift.from_json(plan.state.schema)
              if plan.state is not None and plan.state.schema
              and plan.state.schema.get("fields") else None)
    rescued_column = _rescued_column(source, plan)
    if not plan.files:
        schema = stored or source.schema
        if schema is None:
            return FilesRead(spark.createDataFrame([], StructType([])))
        empty = _with_added(spark.createDataFrame([], schema), source, rescued_column,
                            empty=True)
        return FilesRead(empty, rescued_column=rescued_column)
    base_path = _base_path(source)
    if source.format == "avro" and not _spark_avro_available(spark):
        require("Avro files without Spark's Avro jar (spark-avro; python -m framework.spark.jars "
                "adds it)", since="4.0")  # fastavro reads through a Python data source
        from framework.sources.files import avro

        return FilesRead(avro.read(spark, [f.path for f in plan.files], base_path=base_path,
                                   schema=source.schema, lineage_column=source.lineage_column))
    options = dict(source.options)
    lenient = malformed.applies(source.format, options) and source.bad_records != "fail"
    if malformed.applies(source.format, options):
        options |= malformed.reader_options(source.bad_records)
    if source.format == "text" or (source.schema is not None
                                   and source.format in ("json", "xml")):
        # the job's schema applies as Spark applies it (JSON and XML fields by name)
        schema = (malformed.with_corrupt_column(source.schema)
                  if lenient and source.schema is not None else source.schema)
        df = read_listed(spark, plan.files, format=source.format, options=options,
                         schema=schema, base_path=base_path)
        return FilesRead(_with_added(df, source, None, empty=False))
    # Fields whose names differ only in case are two fields (one of them rescued)
    with temporary_conf(spark, {"spark.sql.caseSensitive": "true"}):
        return _read_by_name(spark, source, plan.files, _ByName(
            options=options, lenient=lenient, base_path=base_path, stored=stored,
            given=None if source.schema is None else
            spark.createDataFrame([], source.schema).schema,
            hints=() if source.schema_hints is None else
            schema_drift.parse_hints(spark, source.schema_hints),
            rescued_column=rescued_column, run_id=run_id))


@dataclass(frozen=True)
class _ByName:
    """How ``_read_by_name`` reads: the reader's ``options``; ``lenient``, malformed records
    set aside; the ``stored`` schema or the one ``given`` by the job."""

    options: Mapping[str, str]
    lenient: bool
    base_path: str | None
    stored: StructType | None
    given: StructType | None
    hints: tuple[schema_drift.Hint, ...]
    rescued_column: str | None
    run_id: str


def _read_by_name(spark: SparkSession, source: FileSource, planned: Sequence[ListedFile],
                  how: _ByName) -> FilesRead:
    """``planned`` read in groups of one layout, each brought to the context's schema by
    name (``schema_drift``)."""
    groups = schema_drift.file_groups(source.format, planned, how.options)
    reads = _group_reads(spark, source, groups, how)
    incoming = schema_drift.first_schema([_data_schema(df.schema) for df in reads])
    mode = source.evolution_mode
    sampled = any(json_schema.UNFIT_FIELDS in df.columns for df in reads)
    drift = (None if how.given is not None
             else schema_drift.Drift(incoming, (
                 "first read, its schema inferred from a sample of its files (what they "
                 f"hold beyond it is in {how.rescued_column})" if sampled else "first read",))
             if how.stored is None else schema_drift.evolve(how.stored, incoming, mode))
    if how.stored is None and how.given is None and not incoming.fields:
        # only empty files (or records of no field) so far: no columns, so that no target
        # is made of the rescued-data or lineage column alone; the next read infers again
        df, _ = _conformed(reads, incoming, dataclasses.replace(source, lineage_column=None),
                           dataclasses.replace(how, rescued_column=None), mode)
        return FilesRead(df, drift, rescued_column=how.rescued_column)
    if drift is not None and how.hints:
        hinted, changes = schema_drift.hinted(drift.schema, how.hints)
        drift = dataclasses.replace(drift, schema=hinted, changes=drift.changes + changes)
    target = how.given if how.given is not None else drift.schema if drift else incoming
    if drift is not None and drift.new and mode == "fail_on_new_columns":
        holding = [f.path for group, df in zip(groups, reads, strict=True)
                   if {n.split(".")[0] for n in drift.new} & set(df.columns)
                   for f in group.files]
        raise ValueError(
            f"new column(s) {', '.join(drift.new)} in {humanize.plural(len(holding), 'file')} "
            f"({', '.join(holding[:3])}{', ...' if len(holding) > 3 else ''}): "
            "schema_evolution='fail_on_new_columns' leaves them unread until the job allows "
            "them (add_new_columns, rescue or none) or fixes its schema")
    df, rescued = _conformed(reads, target, source, how, mode)
    if rescued and how.rescued_column is None:
        if not (source.choice_types and set(rescued) <= set(target.fieldNames())):
            name, count = next(iter(rescued.items()))
            raise ValueError(
                f"{humanize.plural(count, 'value')} of column {name} do not fit its type "
                f"{_type_of(target, name)}: give rescued_data_column to keep them, or a "
                "schema that fits them")
        return _with_choices(reads, target, rescued, source, how, mode, drift)
    return FilesRead(df, drift, rescued, how.rescued_column)


def _conformed(reads: Sequence[DataFrame], target: StructType, source: FileSource,
               how: _ByName, mode: schema_drift.EvolutionMode
               ) -> tuple[DataFrame, dict[str, int]]:
    """The groups' reads brought to ``target``, as one DataFrame, and how many values of
    each column (dotted paths) did not fit it."""
    from pyspark.sql import functions as F

    keep = ([source.lineage_column] if source.lineage_column else []) + (
        [malformed.CORRUPT, malformed.FILE] if how.lenient else [])
    parts: list[DataFrame] = []
    rescued: dict[str, int] = {}
    for df in reads:
        df = _with_added(df, source, None, empty=False)
        if malformed.CORRUPT in df.columns:
            df = df.withColumn(malformed.FILE, F.col("_metadata.file_path"))
        converted, misfits = schema_drift.conform(
            df, target, keep=keep, rescued_column=how.rescued_column, run_id=how.run_id,
            mode=mode, unfit_fields=json_schema.UNFIT_FIELDS
            if json_schema.UNFIT_FIELDS in df.columns else None)
        for name, count in schema_drift.rescue_counts(df, misfits).items():
            rescued[name] = rescued.get(name, 0) + count
        if schema_drift.case_clashes(df.schema):
            # Spark analyses the plan again where the job uses it, case-insensitively:
            # where two fields' names differ only in case, the rows are kept instead
            converted = converted.localCheckpoint(eager=True)
        parts.append(converted)
    return functools.reduce(lambda one, other: one.union(other), parts), rescued


def _with_choices(reads: Sequence[DataFrame], target: StructType, rescued: Mapping[str, int],
                  source: FileSource, how: _ByName, mode: schema_drift.EvolutionMode,
                  drift: schema_drift.Drift | None) -> FilesRead:
    """The read with each column in ``rescued`` a choice of its type and string (Glue's
    choice type): its values' text, its field's metadata naming the type
    (``spark_types.CHOICE``). The context's schema keeps the type."""
    from pyspark.sql.types import StringType, StructField, StructType

    choices = {name: target[name].dataType.simpleString() for name in rescued}
    as_text = StructType([StructField(f.name, StringType(), True) if f.name in choices else f
                          for f in target.fields])
    df, _ = _conformed(reads, as_text, source, how, mode)
    for name, kind in choices.items():
        df = df.withMetadata(name, {CHOICE: kind})
    if drift is not None:
        drift = dataclasses.replace(drift, changes=drift.changes + tuple(
            f"{name}: a choice of {kind} and string ({humanize.plural(rescued[name], 'value')}"
            f" not of its type)" for name, kind in choices.items()))
    return FilesRead(df, drift)


def _group_reads(spark: SparkSession, source: FileSource,
                 groups: Sequence[schema_drift.FileGroup], how: _ByName) -> list[DataFrame]:
    """Each group's files read as Spark reads them (CSV files by their header's names)."""
    from pyspark.sql.types import StructField, StructType

    reads = []
    # CSV headers match these names (or earlier groups')
    known = how.given if how.given is not None else how.stored
    inferred = str(next((v for k, v in how.options.items() if k.lower() == "inferschema"),
                        "false")).lower() == "true"
    for group in groups:
        schema: StructType | str | None = None
        if group.header is not None:
            header = schema_drift.header_schema(group.header, known,
                                                typed=how.given is not None)
            known = schema_drift.first_schema([known, header]) if known else header
            if inferred and how.given is None:  # Spark's types, by position, renamed
                found = read_listed(spark, group.files, format=source.format,
                                    options=how.options, schema=None,
                                    base_path=how.base_path).schema
                header = StructType([StructField(f.name, typed.dataType, True) for f, typed
                                     in zip(header.fields, found.fields, strict=False)])
            schema = header
        elif source.format == "json" and how.given is None:
            reads.append(_json_read(spark, group.files, how))
            continue
        if how.lenient and (schema is not None or source.format != "json"):
            if schema is None:  # only JSON's inference adds the malformed records' column
                schema = read_listed(spark, group.files, format=source.format,
                                     options=how.options, schema=None,
                                     base_path=how.base_path).schema
            schema = malformed.with_corrupt_column(schema)
        reads.append(read_listed(spark, group.files, format=source.format,
                                 options=how.options, schema=schema,
                                 base_path=how.base_path))
    return reads


def _json_read(spark: SparkSession, files: Sequence[ListedFile], how: _ByName) -> DataFrame:
    """JSON files read with the schema the driver infers (where it cannot, Spark infers
    it); a context's first read of more, with the schema of a sample of them."""
    schema = json_schema.infer(files, how.options)
    sample = (json_schema.sample(files, how.options) if schema is None and how.stored is None
              and how.rescued_column is not None else None)
    if sample:
        sampled = json_schema.infer(sample, how.options) or _data_schema(read_listed(
            spark, sample, format="json", options=how.options, schema=None,
            base_path=None).schema)
        if sampled.fields:
            return json_schema.read_sampled(
                spark, files, sampled, base_path=how.base_path,
                corrupt_column=malformed.CORRUPT if how.lenient else None)
    return read_listed(spark, files, format="json", options=how.options, schema=(
        malformed.with_corrupt_column(schema) if schema is not None and how.lenient
        else schema), base_path=how.base_path)


def _type_of(schema: StructType, name: str) -> str:
    """The simple type of the top-level field ``name`` splits from."""
    top = name.split(".")[0]
    return schema[top].dataType.simpleString() if top in schema.fieldNames() else "?"


def _data_schema(schema: StructType) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields
                       if f.name not in (malformed.CORRUPT, json_schema.UNFIT_FIELDS)])


def _rescued_column(source: FileSource, plan: FilePlan) -> str | None:
    """The rescued-data column of this read: the one the source names; by default
    ``_rescued_data`` where deltamark infers the schema, but not for a context that read
    files before deltamark tracked schemas (its targets keep their columns)."""
    wanted = source.rescued_data_column
    if wanted is False or source.format == "text" or (
            source.schema is not None and source.format in ("json", "xml")):
        return None  # Spark applies a JSON or XML schema given itself: nothing is rescued
    if isinstance(wanted, str):
        return wanted
    if source.schema is not None:
        return None
    state = plan.state
    if state is None:
        return schema_drift.RESCUED_COLUMN
    if state.schema is not None:
        return state.rescued_column
    new_context = state.files_total <= len(plan.files)
    return schema_drift.RESCUED_COLUMN if new_context else None


def _with_added(df: DataFrame, source: FileSource, rescued_column: str | None, *,
                empty: bool) -> DataFrame:
    """``df`` (read from files unless ``empty``) with the lineage and rescued-data
    columns, where the source has them."""
    from pyspark.sql import functions as F

    if source.lineage_column:
        df = df.withColumn(source.lineage_column, F.lit(None).cast("string") if empty
                           else F.col("_metadata.file_path"))
    if rescued_column is not None and rescued_column not in df.columns:
        df = df.withColumn(rescued_column, F.lit(None).cast("string"))
    return df


def first_malformed(spark: SparkSession, source: FileSource, plan: FilePlan) -> str | None:
    """Where a FAILFAST read (schema inference) of ``plan`` met its first malformed record,
    as a message (Spark does not say which file); None when no record is found so."""
    lenient = dataclasses.replace(source, bad_records="drop")
    try:
        _, bad = malformed.set_aside(read_files(spark, lenient, plan).df)
    except Exception:  # noqa: BLE001 - only a better message was at stake
        return None
    if not bad:
        return None
    [(file, line, record)] = malformed.located(bad[:1])
    return (f"malformed {source.format} record in {file}"
            f"{f' line {line}' if line else ''}: {record[:100]!r} (bad_records='drop' or "
            "'quarantine' reads on without it)")


def _base_path(source: FileSource) -> str | None:
    """The one root directory, so Spark parses partition directories below it."""
    if len(source.paths) != 1:
        return None
    fs, base, to_uri = filesystem(source.paths[0])
    info = fs.get_file_info(base)
    return to_uri(base) if info.type == pafs.FileType.Directory else None


def _spark_avro_available(spark: SparkSession) -> bool:
    if is_connect(spark):  # the server's: deltamark's set-up puts spark-avro beside Delta
        return True
    try:
        jvm = spark._jvm
        assert jvm is not None  # a classic session's SparkContext has started the py4j gateway
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "avro", spark._jsparkSession.sessionState().conf())
    except Exception:  # noqa: BLE001 - no _jvm (Spark Connect), or a Py4J error: no module
        return False
    return True


def parse_exclusions(value: str | Sequence[str]) -> tuple[str, ...]:
    """Glue passes exclusions as a JSON array string; deltamark also takes a list."""
    if isinstance(value, str):
        parsed = json.loads(value) if value.strip().startswith("[") else [value]
        return tuple(str(p) for p in parsed)
    return tuple(value)
