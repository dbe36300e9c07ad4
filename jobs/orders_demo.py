"""Demo pipeline: write orders to a Delta table from Spark, read them back, record state.

Each run appends one day of orders under a Delta app transaction (app id = job name,
version = run_seq), reads the table back (latest, by time travel, filtered), and records
the run and its bookmark (the table version it produced) in the state tables.

    python -m jobs.orders_demo [--rows N] [--lake DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import uuid

from framework import load_settings
from framework.delta import AppTransaction, delta_engine
from framework.spark import spark_session
from state_tables.model import Bookmark, Run
from state_tables.store import StateStore

JOB = "orders_demo"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.orders_demo")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--lake", default="data/demo/lake")
    args = parser.parse_args(argv)

    settings = load_settings()
    store = StateStore(settings.state_root)
    previous = store.runs(JOB)
    run_seq = previous[-1].run_seq + 1 if previous else 1
    run_id, started = uuid.uuid4().hex, dt.datetime.now(dt.UTC)

    spark = spark_session(settings, app_name=JOB)
    engine = delta_engine(spark, settings.delta)
    target = f"{args.lake}/orders"
    day = dt.date(2026, 1, 1) + dt.timedelta(days=run_seq - 1)

    orders = spark.range(args.rows).selectExpr(
        f"concat('{day:%Y%m%d}-', id) AS order_id",
        f"DATE '{day}' AS order_date",
        "element_at(array('ES', 'FR', 'DE', 'PT'), int(id % 4) + 1) AS country",
        "round(5 + (id * 7919 % 10000) / 100.0, 2) AS amount",
    )
    written = engine.write(orders, target, partition_by=["order_date"],
                           txn=AppTransaction(JOB, run_seq),
                           metadata={"job": JOB, "run_id": run_id, "run_seq": run_seq})

    latest = engine.read(target)
    first = engine.read(target, version=0)
    today = engine.read(target, filters=[("order_date", "=", day)])
    print(f"{JOB}: run {run_seq} on the {engine.name} Delta path wrote {args.rows} orders "
          f"for {day} as table version {written.version}")
    print(f"  rows now {latest.count()}, at version 0 {first.count()}, for {day} "
          f"{today.count()}")
    latest.groupBy("order_date").count().orderBy("order_date").show()

    store.commit_run(
        Run(job=JOB, run_id=run_id, run_seq=run_seq, status="succeeded", mode="enable",
            started_at=started, ended_at=dt.datetime.now(dt.UTC),
            arguments={"rows": str(args.rows), "lake": args.lake}),
        [Bookmark(job=JOB, context="orders_sink", run_id=run_id, run_seq=run_seq,
                  source_kind="delta", state={"table": target, "version": written.version})],
    )


if __name__ == "__main__":
    main()
