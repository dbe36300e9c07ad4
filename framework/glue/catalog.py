"""The Glue Data Catalog tables a script's ``from_catalog`` calls name: those declared under
``catalog:`` in conf, else those of the Spark session's catalog (a Hive metastore, or the
Glue Data Catalog itself on EMR), with their columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework import storage
from framework.config import CatalogTable
from framework.errors import CatalogError, GlueCatalogError
from framework.glue.active_run import GlueRun, active_run
from framework.spark import catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["catalog_columns", "catalog_table"]


def catalog_columns(database: str, table_name: str) -> dict[str, str]:
    """The columns (Spark SQL types) of catalog table ``database.table_name``: those it
    declares, else a Delta table's or Parquet/ORC/Avro files' schema.

    Raises:
        GlueCatalogError: no such table in conf.
    """
    from framework.delta import log
    from framework.delta.files import spark_schema

    run = active_run()
    table = catalog_table(run, database, table_name, "resolveChoice")
    if table.columns:
        return dict(table.columns)
    if table.format == "delta" and log.is_table(table.location):
        schema = spark_schema(log.snapshot(table.location).schema_json)
    elif table.format in ("parquet", "orc", "avro") and storage.exists(table.location):
        schema = run.ctx.spark.read.format(table.format).load(table.location).schema
    else:
        return {}
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def catalog_table(run: GlueRun, database: str, table_name: str, call: str) -> CatalogTable:
    """``database.table_name`` as conf's ``catalog:`` declares it, else as the Spark
    session's catalog has it (location, format, reader options; a CSV table's columns).

    Raises:
        GlueCatalogError: in neither, or a view.
    """
    name = f"{database}.{table_name}"
    if (table := run.catalog.get(name)) is not None:
        return table
    spark = run.ctx.spark
    try:
        found = catalog.lookup(spark, name)
    except CatalogError:  # no such database, or not a name
        found = None
    if found is None or found.kind == "VIEW":
        known = ", ".join(sorted(run.catalog)) or "none"
        session = "a view" if found else "none"
        raise GlueCatalogError(
            f"{call}.from_catalog({name}): no such table under catalog: in "
            f"conf/deltamark.yaml (tables there: {known}), and {session} of that name in "
            "the Spark session's catalog; declare it in conf with its location and format, "
            "or create it in the catalog.")
    return CatalogTable(location=found.location, format=found.format, options=found.options,
                        columns=_columns(spark, name) if found.format == "csv" else {})


def _columns(spark: SparkSession, name: str) -> dict[str, str]:
    """A catalog table's data columns and their types (a CSV file is read by position
    into them)."""
    return {column.name: column.dataType for column in spark.catalog.listColumns(name)
            if not column.isPartition}
