"""Customers sync: an operational customers table, read over JDBC, kept current in Delta.

The bookmark key is ``updated_at``, so the job sees new customers and changed ones. Each
run also re-reads ``lookback_minutes`` before its bookmark (rows committed late by long
transactions) and merges on ``id``: a customer is one row in the target, as of its last
change, however often it is read.
"""

from __future__ import annotations

from datetime import timedelta

from framework import IncrementalJob, JobContext


class CustomersSync(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        p = ctx.params
        customers = ctx.read_jdbc(
            p["table"], connection=p["connection"], transformation_ctx="customers_src",
            keys="updated_at", lookback=timedelta(minutes=float(p["lookback_minutes"])))
        ctx.write_delta(customers, p["target"], mode="merge", merge_on="id")
