"""Customers CDC: a database table replicated by AWS DMS into S3 (a full load, then
change files with ``Op`` I/U/D), applied to a Delta table that equals the source table
(``scd_type: 1``) or keeps every customer's history (``scd_type: 2``).

Each run reads the DMS files it has not read (``LOAD*.csv``, then the change files), and
applies them in one commit: the latest change of a customer by ``dms_ts`` wins, ``D`` rows
delete, a change older than what the table holds (a file delivered late) is ignored. The
full load has no ``Op`` column: the schema hint gives it one, NULL (an insert).
"""

from __future__ import annotations

from framework import IncrementalJob, JobContext


class CustomersCdc(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        from pyspark.sql import functions as F

        p = ctx.params
        changes = ctx.read_files(p["landing"], format="csv", transformation_ctx="dms_files",
                                 schema_hints="Op STRING, id BIGINT, dms_ts STRING")
        changes = changes.withColumn("dms_ts", F.to_timestamp("dms_ts"))
        ctx.write_delta(changes, p["target"], mode="apply_changes", keys="id",
                        sequence_by="dms_ts", apply_as_deletes="Op = 'D'",
                        except_columns=["Op", "_rescued_data"],
                        scd_type=2 if str(p.get("scd_type", "1")) == "2" else 1)
