"""Orders silver: the bronze orders table, read incrementally, cleaned into silver.

Chains on jobs/orders_ingest.py: it reads only the bronze versions committed since its
last run (bookmark context ``bronze_src``), drops rows without an order id or with a
non-positive amount, keeps one row per order id within the batch, and appends to silver,
through the rule set named by the ``checks`` param (``silver_orders``). It publishes
``silver_version``, the version it wrote: in a workflow, orders_gold reads silver as of it.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from framework import IncrementalJob, JobContext


class OrdersSilver(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        bronze = ctx.read_delta(ctx.params["bronze"], transformation_ctx="bronze_src")
        silver = (bronze.where(F.col("order_id").isNotNull() & (F.col("amount") > 0))
                  .dropDuplicates(["order_id"])
                  .select("order_id", "customer_id", "country", "amount", "ordered_at",
                          "order_date", "source_file"))
        written = ctx.write_delta(silver, ctx.params["target"], mode="append",
                                  checks=ctx.params.get("checks") or None)
        ctx.publish("silver_version", written.version)
