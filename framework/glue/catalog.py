"""The Glue Data Catalog tables a script's ``from_catalog`` calls name: those declared under
``catalog:`` in conf, with their columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework import storage
from framework.errors import GlueCatalogError
from framework.glue.active_run import active_run

if TYPE_CHECKING:
    from framework.config import CatalogTable

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
    table = catalog_table(run.catalog, database, table_name, "resolveChoice")
    if table.columns:
        return dict(table.columns)
    if table.format == "delta" and log.is_table(table.location):
        schema = spark_schema(log.snapshot(table.location).schema_json)
    elif table.format in ("parquet", "orc", "avro") and storage.exists(table.location):
        schema = run.ctx.spark.read.format(table.format).load(table.location).schema
    else:
        return {}
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def catalog_table(catalog: Mapping[str, CatalogTable], database: str, table_name: str,
                   call: str) -> CatalogTable:
    name = f"{database}.{table_name}"
    table = catalog.get(name)
    if table is None:
        known = ", ".join(sorted(catalog)) or "none"
        raise GlueCatalogError(
            f"{call}.from_catalog({name}): no such table under catalog: in "
            f"conf/deltamark.yaml (tables there: {known}); declare it with its location "
            "and format.")
    return table
