"""The data-quality gate's cost: a 5-million-row write with 10 rules against the same write
without them.

Three jobs run through ``run_job`` in one warm session, each reading the same Parquet
file and overwriting its own Delta table:

- plain: ``ctx.write_delta(df, target)``;
- gated: the same with ``checks=`` a rule set of 10 rules (policy fail) the rows pass:
  one pass counts what the rules need, GX evaluates them from it, then the write reads
  the rows again;
- quarantine: the same rules with policy quarantine on rows of which 1% break two of them:
  GX, then the split into target and quarantine tables.

Medians of 3 rounds after a warm-up round on a tenth of the rows. The order rotates, so each
job runs first in one round: the first full-size run of a session is the slowest (the JVM
still compiling), and with a fixed or alternating order it always fell on the same jobs.
The overhead is (gated - plain) / plain. DELTAMARK_BENCH_QUALITY_ROWS sets the rows
(default 5,000,000).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from framework import IncrementalJob, JobContext

ROUNDS = 3

RULES = [
    {"IsComplete": "order_id"},
    {"IsUnique": "order_id"},
    {"Completeness": {"column": "email", "at_least": 0.95}},
    {"Uniqueness": {"column": "customer_id", "at_least": 0.0001}},
    {"ColumnValues": {"column": "amount", "between": [0, 1000]}},
    {"ColumnValues": {"column": "status", "in": ["new", "paid", "shipped"]}},
    {"ColumnValues": {"column": "email", "matches": "^[^@ ]+@[^@ ]+$"}},
    {"ColumnLength": {"column": "country", "between": [2, 2]}},
    {"ColumnExists": "amount"},
    {"RowCount": {"at_least": 1}},
]


class Copy(IncrementalJob):
    """The Parquet source -> a Delta table, through ``checks`` when given."""

    def run(self, ctx: JobContext) -> None:
        df = ctx.read_files(ctx.params["source"], format="parquet", bookmark=False)
        ctx.write_delta(df, ctx.params["target"], mode="overwrite",
                        checks=ctx.params.get("checks") or None)


def orders(spark, count: int, *, broken_every: int = 0):
    from pyspark.sql import functions as F

    n = F.col("id")
    broken = (n % broken_every == 0) if broken_every else F.lit(False)
    return spark.range(count).select(
        n.alias("order_id"), (n % 5000).alias("customer_id"),
        F.when(broken, -1.0).otherwise((n % 1000) * 0.99).alias("amount"),
        F.when(broken, F.lit("lost")).otherwise(
            F.element_at(F.array(*map(F.lit, ("new", "paid", "shipped"))),
                         (n % 3 + 1).cast("int"))).alias("status"),
        F.format_string("user%d@example.com", n % 100_000).alias("email"),
        F.lit("PT").alias("country"))


def main() -> None:
    from framework import load_settings, run_job
    from framework.config import Settings, SparkSettings
    from framework.delta import delta_engine
    from framework.spark.session import spark_session

    count = int(os.environ.get("DELTAMARK_BENCH_QUALITY_ROWS", "5000000"))
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-quality-"))
    try:
        (scratch / "conf" / "jobs").mkdir(parents=True)
        (scratch / "conf" / "deltamark.yaml").write_text(f"state_root: {scratch / 'state'}\n")
        checks = {"orders": {"policy": "fail", "rules": RULES},
                  "orders_q": {"policy": "quarantine", "rules": RULES,
                               "quarantine": str(scratch / "rejected_rows")}}
        sources = {"clean": scratch / "clean", "broken": scratch / "broken"}
        warm_up = {"clean": scratch / "clean_warm_up", "broken": scratch / "broken_warm_up"}
        for rows, where in ((count, sources), (count // 10, warm_up)):
            orders(spark, rows).write.parquet(str(where["clean"]))
            orders(spark, rows, broken_every=100).write.parquet(str(where["broken"]))
        jobs = {"plain": ("clean", ""), "gated": ("clean", "orders"),
                "quarantine": ("broken", "orders_q")}
        for name, (source, ruleset) in jobs.items():
            (scratch / "conf" / "jobs" / f"{name}.yaml").write_text(yaml.safe_dump({
                "class": f"{__name__}:Copy", "checks": checks, "params": {
                    "source": str(sources[source]), "target": str(scratch / name),
                    "checks": ruleset}}))
        settings = load_settings(conf_dir=scratch / "conf")
        times: dict[str, list[float]] = {name: [] for name in jobs}
        order = list(jobs)
        for round_ in range(ROUNDS + 1):  # round 0 warms up, on a tenth of the rows
            for name in order[round_ % len(order):] + order[:round_ % len(order)]:
                warming = {} if round_ else {"source": str(warm_up[jobs[name][0]])}
                started = time.perf_counter()
                run_job(settings, name, spark=spark, args=warming)
                if round_:
                    times[name].append(time.perf_counter() - started)
        quarantined = delta_engine(spark, mode="embedded").read(
            str(scratch / "rejected_rows")).count()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    plain, gated, split = (statistics.median(times[n]) for n in ("plain", "gated",
                                                                  "quarantine"))
    print(f"\nbench_quality: {count:,} rows, {len(RULES)} rules (great-expectations); "
          f"{os.cpu_count()} cores; median of {ROUNDS}")
    print(f"{'write alone':>12}{'gated':>10}{'ratio':>8}{'overhead':>10}"
          f"{'quarantine 1%':>15}{'ratio':>8}")
    print(f"{plain:>11.1f}s{gated:>9.1f}s{gated / plain:>8.2f}{(gated - plain) / plain:>9.0%}"
          f"{split:>14.1f}s{split / plain:>8.2f}")
    print(f"quarantined rows in the last table: {quarantined:,} "
          f"(expected {len(range(0, count, 100)) * ROUNDS + len(range(0, count // 10, 100)):,}"
          " over all rounds)")


if __name__ == "__main__":
    main()
