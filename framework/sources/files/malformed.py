"""Malformed records in text files (JSON, CSV, XML): named, never silently loaded.

A file source's ``bad_records`` policy decides:

- ``fail`` (the default): Spark parses in FAILFAST mode, so the run fails on the first
  malformed record, naming its file and the parser's complaint;
- ``drop``: malformed records are left out and counted (``malformed`` in the run's
  inputs);
- ``quarantine``: they are left out and written, with their file and line, to a Delta
  table, in the same run (exactly once, as any target).

A reader ``mode`` option given by the job takes precedence over the policy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["CORRUPT", "FILE", "POLICIES", "QUARANTINE_SCHEMA", "TEXT_FORMATS", "BadRecords",
           "applies", "located", "reader_options", "set_aside", "with_corrupt_column"]

BadRecords = Literal["fail", "drop", "quarantine"]
POLICIES: tuple[str, ...] = ("fail", "drop", "quarantine")
#: the formats whose parser can find a record malformed
TEXT_FORMATS = frozenset({"json", "csv", "xml"})
#: where Spark puts a malformed record's text while parsing (PERMISSIVE mode)
CORRUPT = "_dm_malformed_record"
#: the file a record was read from, beside ``CORRUPT`` (added by ``set_aside`` if missing)
FILE = "_dm_file"
#: malformed records located and quarantined at most, per read (they go through the driver)
MAX_QUARANTINED = 100_000
#: the quarantine table's columns
QUARANTINE_SCHEMA = ("context STRING, file STRING, line BIGINT, record STRING, "
                     "run_id STRING, run_seq BIGINT")


def applies(format: str, options: Mapping[str, str]) -> bool:
    """Whether deltamark's policy decides (a text format, no ``mode`` of the job's own)."""
    return format in TEXT_FORMATS and not any(k.lower() == "mode" for k in options)


def reader_options(policy: BadRecords) -> dict[str, str]:
    """The reader options that carry out ``policy``."""
    if policy == "fail":
        return {"mode": "FAILFAST"}
    return {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


def with_corrupt_column(schema: StructType | str) -> StructType | str:
    """``schema`` with the column Spark fills with a malformed record's text."""
    if isinstance(schema, str):
        return f"{schema}, `{CORRUPT}` STRING"
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])


def set_aside(df: DataFrame) -> tuple[DataFrame, list[tuple[str, str]]]:
    """The well-formed rows of ``df`` (read with ``CORRUPT``) and each malformed record as
    (file, text), in file order. The parsed input is persisted (memory, then disk): Spark
    refuses to filter a raw text read on ``CORRUPT`` alone, and it is read twice.

    Raises:
        ValueError: more than ``MAX_QUARANTINED`` malformed records.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if CORRUPT not in df.columns:
        return df, []
    if FILE not in df.columns:
        df = df.withColumn(FILE, F.col("_metadata.file_path"))
    parsed = df.persist(StorageLevel.MEMORY_AND_DISK)
    bad = (parsed.where(F.col(CORRUPT).isNotNull()).select(FILE, CORRUPT)
           .limit(MAX_QUARANTINED + 1).collect())
    if len(bad) > MAX_QUARANTINED:
        raise ValueError(f"more than {MAX_QUARANTINED} malformed records (e.g. in "
                         f"{bad[0][0]}): is the format or schema right?")
    good = parsed.where(F.col(CORRUPT).isNull()).drop(CORRUPT, FILE)
    return good, [(row[0], row[1]) for row in bad]


def located(records: Sequence[tuple[str, str]]) -> list[tuple[str, int | None, str]]:
    """(file, line, text) of each malformed record: its 1-based line in the file, found
    by its text (None when the record is not one line, e.g. multi-line JSON)."""
    lines_of: dict[str, dict[str, list[int]]] = {}
    wanted: dict[str, set[str]] = defaultdict(set)
    for file, text in records:
        wanted[file].add(text.rstrip("\r\n"))
    for file, texts in wanted.items():
        fs, path, _ = filesystem(file)
        found: dict[str, list[int]] = defaultdict(list)
        with fs.open_input_stream(path) as stream:
            for number, line in enumerate(stream.read().decode("utf-8", "replace")
                                          .splitlines(), start=1):
                if line in texts:
                    found[line].append(number)
        lines_of[file] = found
    result = []
    for file, text in records:
        numbers = lines_of[file].get(text.rstrip("\r\n"))
        result.append((file, numbers.pop(0) if numbers else None, text))
    return result

