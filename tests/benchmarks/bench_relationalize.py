"""Relationalize and write 1 million nested documents, against the flat tables written by
hand with explode.

The documents have 3 levels: an order (with a customer struct holding an address struct),
its lines (an array of structs, 0-3 per order), each line's discounts (an array of
structs, 0-2 per line), and tags (an array of strings). Both sides read the same Parquet
file and write the same four tables to Delta through the same engine, in the same warm
session, three times in alternating order; the medians are compared:

- relationalize: ``relationalize(df, "orders", key_columns=["order_id"])``, every table
  written as it comes (hashed keys, Glue's layout).
- by hand: a select of the flattened order columns, then ``posexplode`` for lines, lines'
  discounts and tags, keyed by order_id and positions.

DELTAMARK_BENCH_DOCUMENTS sets the number of documents (default 1,000,000).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROUNDS = 3


def documents(spark, count: int):
    from pyspark.sql import functions as F

    n = F.col("id")

    def upto(k):  # [0, 1, ..., k - 1] for k <= 3
        return F.slice(F.array(F.lit(0), F.lit(1), F.lit(2)), 1, k.cast("int"))

    def discounts(line):
        return F.transform(upto((n + line) % 3), lambda d: F.struct(
            F.concat(F.lit("D"), d.cast("string")).alias("code"), (d + 1).alias("amount")))

    lines = F.transform(upto(n % 4), lambda i: F.struct(
        F.element_at(F.array(*map(F.lit, ("apple", "bread", "cheese"))), i + 1).alias("sku"),
        (i + 1).alias("qty"), ((n % 100) / 10 + i).alias("price"),
        discounts(i).alias("discounts")))
    return spark.range(count).select(
        F.format_string("o%09d", n).alias("order_id"),
        F.timestamp_seconds(n + 1_790_000_000).alias("ordered_at"),
        F.struct((n % 500).alias("id"), F.concat(F.lit("customer "), n.cast("string"))
                 .alias("name"), F.struct(F.lit("Porto").alias("city"),
                                          F.lit("PT").alias("country")).alias("address"))
        .alias("customer"),
        lines.alias("lines"),
        F.slice(F.array(F.lit("gift"), F.lit("express")), 1, (n % 3).cast("int")).alias("tags"))


def by_hand(df) -> dict:
    from pyspark.sql import functions as F

    orders = df.select("order_id", "ordered_at", F.col("customer.id").alias("customer_id"),
                       F.col("customer.name").alias("customer_name"),
                       F.col("customer.address.city").alias("customer_city"),
                       F.col("customer.address.country").alias("customer_country"))
    exploded = df.select("order_id", F.posexplode("lines").alias("line_index", "line"))
    lines = exploded.select("order_id", "line_index", "line.sku", "line.qty", "line.price")
    discounts = exploded.select("order_id", "line_index", F.posexplode("line.discounts")
                                .alias("discount_index", "discount")).select(
        "order_id", "line_index", "discount_index", "discount.code", "discount.amount")
    tags = df.select("order_id", F.posexplode("tags").alias("tag_index", "tag"))
    return {"orders": orders, "orders_lines": lines, "orders_lines_discounts": discounts,
            "orders_tags": tags}


def _write_all(engine, tables: dict, root: Path) -> float:
    started = time.perf_counter()
    for name, table in tables.items():
        engine.write(table, str(root / name))
    return time.perf_counter() - started


def main() -> None:
    from framework.config import Settings, SparkSettings
    from framework.delta import delta_engine
    from framework.spark.session import spark_session
    from framework.transforms import relationalize

    count = int(os.environ.get("DELTAMARK_BENCH_DOCUMENTS", "1000000"))
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    engine = delta_engine(spark, mode="embedded")
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-relationalize-"))
    try:
        documents(spark, count).write.parquet(str(scratch / "documents"))
        source = spark.read.parquet(str(scratch / "documents"))
        warm = source.limit(1000)
        _write_all(engine, by_hand(warm), scratch / "warm_hand")
        _write_all(engine, relationalize(warm, "orders", key_columns=["order_id"]),
                   scratch / "warm_rel")
        tables = relationalize(source, "orders", key_columns=["order_id"])
        times: dict[str, list[float]] = {"hand": [], "relationalize": []}
        for round_ in range(ROUNDS):
            for side in sorted(times, reverse=round_ % 2 == 1):  # alternate who goes first
                written = by_hand(source) if side == "hand" else tables
                times[side].append(_write_all(engine, written, scratch / f"{side}{round_}"))
        hand, rel = statistics.median(times["hand"]), statistics.median(times["relationalize"])
        rows = {name: engine.read(str(scratch / "relationalize0" / name)).count()
                for name in tables}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"\nbench_relationalize: {count:,} nested documents (3 levels) -> "
          f"{', '.join(f'{n} {r:,}' for n, r in rows.items())} rows; {os.cpu_count()} cores")
    print(f"{'by hand (explode)':>18}{'relationalize':>15}{'ratio':>8}   (median of {ROUNDS})")
    print(f"{hand:>17.1f}s{rel:>14.1f}s{rel / hand:>8.2f}")


if __name__ == "__main__":
    main()
