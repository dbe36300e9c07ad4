"""Orders gold: revenue and order count per day and country, from the silver orders.

Recomputed in full each run (an aggregate over all of silver), from silver as of the
version orders_silver published in the same workflow run (param ``silver_version``, which
the workflow's trigger maps from that run property), or the latest when run alone: the
numbers match exactly what the upstream run committed, even if silver moves on meanwhile.
Publishes ``gold_version``.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from framework import IncrementalJob, JobContext


class OrdersGold(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        version = ctx.params.get("silver_version")
        silver = ctx.read_delta(ctx.params["silver"], bookmark=False, change_feed=False,
                                version=int(version) if version else None)
        gold = silver.groupBy("order_date", "country").agg(
            F.count(F.lit(1)).alias("orders"), F.round(F.sum("amount"), 2).alias("revenue"))
        written = ctx.write_delta(gold, ctx.params["target"], mode="overwrite")
        ctx.publish("gold_version", written.version)
