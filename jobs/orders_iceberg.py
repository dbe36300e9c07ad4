"""Orders in an Iceberg lake: the orders a bronze Iceberg table gained since the last run
-> a silver Iceberg table, upserted on ``order_id``.

Each run reads the snapshots committed to ``source`` after the one its bookmark (context
``orders_src``) names, up to the table's current one, and merges the orders into
``target`` in one snapshot that names the run: a replay finds it and writes nothing. Tables
are named as Spark names them (``lake.sales.orders``), in a catalog set in the
``spark: conf:`` of conf/deltamark.yaml (docs/sources.md). The ``mode`` param writes with
``append`` or ``overwrite`` instead of ``merge``.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from framework import IncrementalJob, JobContext


class OrdersToSilver(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        orders = ctx.read_iceberg(ctx.params["source"], transformation_ctx="orders_src")
        silver = (orders.withColumn("amount_band", F.when(F.col("amount") >= 100, "large")
                                    .otherwise("small"))
                  .withColumn("loaded_by_run", F.lit(ctx.run_seq)))
        mode = ctx.params.get("mode", "merge")
        ctx.write_iceberg(silver, ctx.params["target"], mode=mode,
                          keys=["order_id"] if mode == "merge" else ())
