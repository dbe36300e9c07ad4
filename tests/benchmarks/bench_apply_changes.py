"""Apply 1% of a table's rows as change records (``write_delta(mode="apply_changes")``,
native path) against a hand-written delta-spark MERGE of the same changes, deduplicated
beforehand: what applying changes costs over the MERGE a user would write. Targets:
SCD 1 <= 1.3x, SCD 2 <= 2x.

The changes: 1% of the keys, a tenth of them deleted, a fifth changed twice in the run
(deltamark picks the latest; the baseline is given only that one), and 10% new keys.
Each round copies the N-row target three times (the baseline's, SCD 1's, SCD 2's: an SCD 2
table of N rows with one open row per key), then times one write to each; the first
round warms up on a tenth of the rows.

DELTAMARK_BENCH_APPLY_ROWS sets N (default 10 million); DELTAMARK_BENCH_APPLY_ROUNDS the
measured rounds (default 3).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from tests.benchmarks import medians

TARGETS = {"scd1": 1.3, "scd2": 2.0}


def main() -> None:
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import AppTransaction, delta_engine, native_available
    from framework.delta.changes import ApplyChanges
    from framework.spark.session import spark_session

    rows = int(os.environ.get("DELTAMARK_BENCH_APPLY_ROWS", 10_000_000))
    rounds = int(os.environ.get("DELTAMARK_BENCH_APPLY_ROUNDS", 3))
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    if not native_available(spark):
        raise SystemExit("bench_apply_changes: Delta's jars are not on the session")
    engine = delta_engine(spark, mode="native")
    scratch = tempfile.mkdtemp(prefix="deltamark-bench-")

    def table(n: int):
        return spark.range(n).select(
            F.col("id"), (F.col("id") % 1000).cast("int").alias("customer"),
            (F.col("id") * 0.37).alias("amount"), F.lit(0).cast("long").alias("seq"))

    def changes(n: int):
        """1% of n keys (some past n: inserts), 10% deletes, a fifth twice."""
        picked = spark.range(n // 100).select(((F.col("id") * 97) % (n * 11 // 10)).alias("id"))
        once = picked.select("id", F.lit(1).cast("long").alias("seq"))
        twice = picked.where(F.col("id") % 5 == 0).select("id", F.lit(2).cast("long").alias(
            "seq"))
        return once.unionByName(twice).select(
            "id", (F.col("id") % 1000).cast("int").alias("customer"),
            (F.col("id") * 0.5 + F.col("seq")).alias("amount"), "seq",
            F.when(F.col("id") % 10 == 3, "D").otherwise("U").alias("op"))

    def baseline(path: str, n: int) -> None:
        latest = changes(n).groupBy("id").agg(F.max_by(F.struct("*"), "seq").alias("c")) \
            .select("c.*").cache()
        latest.count()  # deduplicated beforehand: not the MERGE's work
        latest.createOrReplaceTempView("bench_changes")
        started = time.perf_counter()
        spark.sql(f"MERGE INTO delta.`{path}` t USING bench_changes s ON t.id = s.id "
                  "WHEN MATCHED AND s.op = 'D' THEN DELETE "
                  "WHEN MATCHED THEN UPDATE SET t.customer = s.customer, t.amount = s.amount, "
                  "t.seq = s.seq WHEN NOT MATCHED AND s.op != 'D' THEN INSERT "
                  "(id, customer, amount, seq) VALUES (s.id, s.customer, s.amount, s.seq)")
        spent["baseline"].append(time.perf_counter() - started)
        latest.unpersist()

    def applied(kind: str, path: str, n: int) -> None:
        options = ApplyChanges(keys=("id",), sequence_by=("seq",),
                               apply_as_deletes="op = 'D'", except_columns=("op",),
                               scd_type=1 if kind == "scd1" else 2)
        df = changes(n)
        started = time.perf_counter()
        engine.write(df, path, mode="apply_changes", changes=options,
                     txn=AppTransaction("bench", 1))
        spent[kind].append(time.perf_counter() - started)

    spent: dict[str, list[float]] = {"baseline": [], "scd1": [], "scd2": []}
    try:
        for rep in range(rounds + 1):
            n = rows if rep else rows // 10
            base = f"{scratch}/base{rep}"
            table(n).write.format("delta").save(base)
            history = f"{scratch}/history{rep}"
            table(n).select("id", "customer", "amount", "seq", F.col("seq").alias(
                "__START_AT"), F.lit(None).cast("long").alias("__END_AT")) \
                .write.format("delta").save(history)
            for name in ("baseline", "scd1"):
                shutil.copytree(base, f"{scratch}/{name}{rep}")
            baseline(f"{scratch}/baseline{rep}", n)
            applied("scd1", f"{scratch}/scd1{rep}", n)
            applied("scd2", history, n)
            if not rep:
                for values in spent.values():
                    values.clear()
            else:
                assert (engine.read(f"{scratch}/scd1{rep}").exceptAll(
                    engine.read(f"{scratch}/baseline{rep}")).count() == 0)
            for name in ("base", "baseline", "scd1"):
                shutil.rmtree(f"{scratch}/{name}{rep}", ignore_errors=True)
            shutil.rmtree(history, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    median = medians("bench_apply_changes", spent)
    print(f"\nbench_apply_changes: {rows:,}-row target, {rows // 100:,} changed keys "
          f"(10% deletes, a fifth twice), {os.cpu_count()} cores, median of {rounds} rounds")
    print(f"{'write':<40}{'time':>8}{'ratio':>8}")
    print(f"{'hand-written MERGE (deduplicated)':<40}{median['baseline']:>7.2f}s")
    for kind, target in TARGETS.items():
        ratio = median[kind] / median["baseline"]
        print(f"{'apply_changes ' + kind.upper():<40}{median[kind]:>7.2f}s{ratio:>8.2f}"
              f"  <= {target} {'ok' if ratio <= target else 'MISSED'}")


if __name__ == "__main__":
    main()
