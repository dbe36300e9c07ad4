"""Where runs write: one module per kind of target (``delta``, ``parquet`` and the other
file formats, ``jdbc``, ``iceberg``), each with its ``Target`` (``target``), and ``target_of`` to
pick the kind."""

from __future__ import annotations

from framework.delta import log
from framework.iceberg import names_table
from framework.sinks import iceberg, jdbc, parquet
from framework.sinks.delta import DeltaTarget
from framework.sinks.target import Target, Written
from state_tables.model import RunOutput

__all__ = ["Target", "Written", "target_of", "written"]


def target_of(key: str, *, output: RunOutput | None = None,
              databases: jdbc.DatabaseTargets | None = None) -> Target:
    """The target runs name ``key``, of the kind its output entry (``Run.outputs[key]``)
    tags (no tag: Delta); without an entry, of the kind found there: a database table by
    its ``jdbc://`` key, an Iceberg table by its name in a configured catalog, a Delta
    table by its log, else a directory of files.
    ``databases`` reaches database targets."""
    if jdbc.is_target(key) or (output and jdbc.is_output(output)):
        return jdbc.DatabaseTarget(key, output or {}, databases)
    if (output and iceberg.is_output(output)) or (not output and names_table(key)):
        return iceberg.IcebergTarget(key)
    if output and parquet.is_output(output):
        return parquet.ParquetTarget(key)
    if output or log.is_table(key):
        return DeltaTarget(key)
    return parquet.ParquetTarget(key)


def written(key: str, output: RunOutput) -> Written | None:
    """What a run's commit put in target ``key``, from its entry ``output`` in
    ``Run.outputs``; None when the run left nothing there (no write, or rolled back)."""
    if not output.get("written") or output.get("rolled_back"):
        return None
    return target_of(key, output=output).written(output)
