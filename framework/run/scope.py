"""What one run's reads and writes share (``JobRun.scope``): its Spark session, identity,
plan, Delta engine, state store, connections and log, and what they note as they go."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework.jdbc import Connection
from framework.run.lineage import RunDatasets
from framework.run.plan import RunIdentity, RunPlan
from state_tables.store import StateStore

if TYPE_CHECKING:
    from datetime import timedelta

    from pyspark.sql import SparkSession

    from framework.delta import DeltaEngine

__all__ = ["Connections", "RunScope"]

#: Resolves a connection name from conf (or a jdbc: URL) to a ``Connection``.
Connections = Callable[[str], Connection]


@dataclass
class RunScope:
    """One run's shared context. ``lineage``: what it read and wrote, as its lineage
    events name them; ``rescued_columns``: the rescued-data columns of its file reads;
    ``schema_changes``: context -> what its files changed in its schema, in words."""

    spark: SparkSession
    identity: RunIdentity
    plan: RunPlan
    engine: DeltaEngine
    store: StateStore
    connections: Connections
    log: logging.Logger
    dry_run: bool
    #: how long an apply_changes write keeps delete tombstones (the job's conf)
    tombstone_retention: timedelta
    lineage: RunDatasets = field(default_factory=RunDatasets)
    rescued_columns: set[str] = field(default_factory=set)
    schema_changes: dict[str, list[str]] = field(default_factory=dict)
