"""An operational customers table in SQLite that changes the way a live database does.

    python -m jobs.customers_source [--db FILE] [--new N] [--update M]

Each call inserts N new customers and updates M existing ones (a new country and
``updated_at``), in one transaction. jobs/customers_sync.py reads the changes over JDBC.
Time is simulated so runs are repeatable: each change is 10 minutes after the last one.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

COUNTRIES = ("PT", "ES", "FR", "DE")
START = datetime(2026, 11, 1)
STEP = timedelta(minutes=10)


def change(db: Path, *, new: int, update: int) -> tuple[int, int]:
    """Insert ``new`` customers and update ``update`` existing ones; returns the counts."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS customers (id INTEGER PRIMARY KEY, "
                     "name TEXT NOT NULL, country TEXT NOT NULL, updated_at TIMESTAMP NOT NULL)")
        count, last = conn.execute("SELECT COUNT(*), MAX(updated_at) FROM customers").fetchone()
        clock = datetime.fromisoformat(last) if last else START - STEP

        def tick() -> str:
            nonlocal clock
            clock += STEP
            return str(clock)

        rng = random.Random(count)
        changed = rng.sample(range(1, count + 1), min(update, count))
        conn.executemany("UPDATE customers SET country = ?, updated_at = ? WHERE id = ?",
                         [(rng.choice(COUNTRIES), tick(), i) for i in changed])
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", [
            (i, f"customer {i}", rng.choice(COUNTRIES), tick())
            for i in range(count + 1, count + new + 1)])
    return new, len(changed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.customers_source")
    parser.add_argument("--db", default="data/shop.sqlite")
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--update", type=int, default=0)
    args = parser.parse_args(argv)
    added, updated = change(Path(args.db), new=args.new, update=args.update)
    print(f"{args.db}: {added} customers added, {updated} updated")


if __name__ == "__main__":
    main()
