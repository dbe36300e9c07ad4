"""Orders ingest: JSON order batches landing in a directory -> a bronze Delta table.

Each run reads only the batch files that earlier runs have not processed (bookmark
context ``orders_src``), stamps each row with its source file and the run that loaded it,
and appends to the bronze table in one commit tagged with the run. The rule set named by
the ``checks`` param (``bronze_orders`` in conf/jobs/orders_ingest.yaml) gates the write:
a batch that breaks it is rejected whole and waits, unread, until it is resent corrected.
The ``listing`` param picks how the landing directory is listed (``full`` by default;
``start_after`` for names that grow in order: docs/sources.md).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from framework import IncrementalJob, JobContext

ORDER_SCHEMA = ("order_id STRING, customer_id STRING, country STRING, amount DOUBLE, "
                "ordered_at TIMESTAMP")


class OrdersIngest(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        orders = ctx.read_files(ctx.params["landing"], format="json", schema=ORDER_SCHEMA,
                                transformation_ctx="orders_src",
                                lineage_column="source_file",
                                listing=ctx.params.get("listing", "full"))
        bronze = orders.withColumn("order_date", F.to_date("ordered_at")).withColumn(
            "loaded_by_run", F.lit(ctx.run_seq))
        ctx.write_delta(bronze, ctx.params["target"], mode="append",
                        checks=ctx.params.get("checks") or None)
