"""Land order batches as JSON files, the way an upstream system would drop them.

    python -m jobs.orders_landing [--landing DIR] [--batches N] [--orders M] [--broken K]
    python -m jobs.orders_landing --resend      # the newest batch again, without errors

Each call adds N new batch files (numbered after the ones already there), M orders each.
``--broken K`` spoils K orders of each new batch the way upstream systems do (a missing
customer, a negative amount, an unknown country, an order sent twice), for the data-quality
gate of jobs/orders_ingest.py to reject; ``--resend`` then replaces the newest batch with
a corrected one.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

COUNTRIES = ("PT", "ES", "FR", "DE")


def land(landing: Path, *, batches: int, orders: int, broken: int = 0) -> list[Path]:
    """Write ``batches`` new batch files of ``orders`` orders each, ``broken`` of them
    spoilt; returns their paths."""
    landing.mkdir(parents=True, exist_ok=True)
    first = len(list(landing.glob("batch-*.json"))) + 1
    return [_write_batch(landing, number, orders, broken)
            for number in range(first, first + batches)]


def resend(landing: Path, *, orders: int) -> Path:
    """Replace the newest batch file with a corrected one (same orders, no errors)."""
    newest = sorted(landing.glob("batch-*.json"))[-1]
    return _write_batch(landing, int(newest.stem.removeprefix("batch-")), orders, 0)


def _write_batch(landing: Path, number: int, orders: int, broken: int) -> Path:
    rng = random.Random(number)
    day = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=number - 1)
    rows = [{"order_id": f"{number:05}-{i:04}", "customer_id": f"c{rng.randrange(500):03}",
             "country": rng.choice(COUNTRIES), "amount": round(rng.uniform(5, 500), 2),
             "ordered_at": (day + timedelta(minutes=i)).isoformat()} for i in range(orders)]
    for i in range(broken):  # one kind of damage after the other
        row = rows[i * 7 % orders]
        damage = i % 4
        if damage == 0:
            row["customer_id"] = None
        elif damage == 1:
            row["amount"] = -row["amount"]
        elif damage == 2:
            row["country"] = "XX"
        else:
            rows.append(dict(row))
    path = landing / f"batch-{number:05}.json"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.orders_landing")
    parser.add_argument("--landing", default="data/landing/orders")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--broken", type=int, default=0, help="spoilt orders per batch")
    parser.add_argument("--resend", action="store_true",
                        help="replace the newest batch with a corrected one")
    args = parser.parse_args(argv)
    if args.resend:
        print(f"resent {resend(Path(args.landing), orders=args.orders)}")
        return
    for path in land(Path(args.landing), batches=args.batches, orders=args.orders,
                     broken=args.broken):
        print(f"landed {path}")


if __name__ == "__main__":
    main()
