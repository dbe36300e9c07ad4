"""Order documents: nested JSON orders -> flat Delta tables, all written by one run.

Each new document becomes a row of ``orders`` and rows of its child tables:
``orders_lines``, ``orders_lines_discounts``, ``orders_tags`` (framework.transforms
.relationalize has the layout). Keys derive from ``order_id``, so a replayed run writes
the same keys, and the exactly-once protocol writes each table once per run. A field that
appears in later documents becomes a new column (``merge_schema``).
"""

from __future__ import annotations

from framework import IncrementalJob, JobContext
from framework.transforms import relationalize


class OrderDocuments(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        documents = ctx.read_files(ctx.params["landing"], format="json",
                                   transformation_ctx="documents_src")
        if not documents.columns:  # no new files, nothing to infer a schema from
            return
        documents = documents.persist()  # every table reads the same documents
        tables = relationalize(documents, "orders", key_columns=["order_id"])
        for name, table in tables.items():
            ctx.write_delta(table, f"{ctx.params['lake']}/{name}", merge_schema=True)
        documents.unpersist()
