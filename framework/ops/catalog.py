"""The state tables in the user's catalog (``deltamark state register``): external tables
over the state root's Delta tables and the views ``deltamark sql`` offers, so that the
platform's own Spark SQL (or, through the same metastore, Trino and Athena) queries them.
Registering is idempotent and never moves or writes the state."""

from __future__ import annotations

import re
from dataclasses import dataclass

from framework import storage
from framework.config import Settings
from framework.delta import log, native_available
from framework.errors import CatalogError
from framework.spark import catalog
from framework.state.table_io import settings_store
from state_tables.schemas import TABLES
from state_tables.sql import VIEWS

__all__ = ["Registered", "register_state"]


@dataclass(frozen=True)
class Registered:
    """One name ``register_state`` looked at: ``done`` is ``registered``, ``already
    there``, ``view`` or ``not written yet`` (a state table no run has written)."""

    name: str
    location: str | None
    done: str


def register_state(settings: Settings, database: str, *, catalog_name: str | None = None
                   ) -> list[Registered]:
    """Enter the state tables of ``settings``' state root in the Spark session's catalog
    as ``[catalog_name.]database.<table>`` (the database is created when missing), and
    the views of ``deltamark sql`` over them (replaced, as their text may change).

    Raises:
        CatalogError: a bad name, a name that is another table, or a session without
            Delta's jars.
    """
    from framework.spark.session import spark_session

    namespace = f"{catalog_name}.{database}" if catalog_name else database
    if not catalog.is_name(f"{namespace}.runs") or namespace.count(".") > 1:
        raise CatalogError(namespace, "not a database name: letters, digits and _.")
    spark = spark_session(settings)
    if not native_available(spark):
        raise CatalogError(namespace, "registering Delta tables needs Delta's jars on the "
                           "Spark session (bash .ci/setup.sh fetches them; conf delta: "
                           "native or auto).")
    catalog.require_lasting(spark, f"{namespace}.runs")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {namespace}")
    store, done = settings_store(settings), []
    for table_name, table in TABLES.items():
        name, location = f"{namespace}.{table_name}", storage.absolute(store.path(table))
        if not log.is_table(location):
            done.append(Registered(name, location, "not written yet"))
            continue
        found = catalog.lookup(spark, name)
        if found is not None and found.location != location:
            raise CatalogError(name, f"it is another table (at {found.location}), not the "
                               f"state's {location}. Drop it, or register in another database.")
        if found is None:
            catalog.register_delta(spark, name, location)
        done.append(Registered(name, location, "already there" if found else "registered"))
    registered = {r.name.rsplit(".", 1)[1] for r in done if r.done != "not written yet"}
    for view, body in VIEWS.items():
        if set(re.findall(r"\bFROM (\w+)", body)) <= registered:
            spark.sql(f"CREATE OR REPLACE VIEW {namespace}.{view} AS "
                      + re.sub(r"\bFROM (\w+)\b", rf"FROM {namespace}.\1", body))
            done.append(Registered(f"{namespace}.{view}", None, "view"))
    return done
