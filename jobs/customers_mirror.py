"""Customers mirror: an upstream Delta table's Change Data Feed applied to a copy of it.

Each run reads the versions of ``source`` committed since its last run, every inserted,
updated and deleted row with ``_change_type`` and ``_commit_version``, and applies them in
one commit: an update's pre-image is left out, its post-image updates the row, a delete
deletes it, and a key changed in several versions ends as of the latest. The copy keeps
``_commit_version``, the upstream version each row is as of.
"""

from __future__ import annotations

from framework import IncrementalJob, JobContext


class CustomersMirror(IncrementalJob):
    def run(self, ctx: JobContext) -> None:
        p = ctx.params
        feed = ctx.read_delta(p["source"], transformation_ctx="customers_feed",
                              change_feed=True)
        ctx.write_delta(feed.where("_change_type != 'update_preimage'"), p["target"],
                        mode="apply_changes", keys="id", sequence_by="_commit_version",
                        apply_as_deletes="_change_type = 'delete'",
                        except_columns=["_change_type", "_commit_timestamp"])
