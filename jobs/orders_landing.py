"""Land order batches as JSON files, the way an upstream system would drop them.

    python -m jobs.orders_landing [--landing DIR] [--batches N] [--orders M]

Each call adds N new batch files (numbered after the ones already there), M orders each.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

COUNTRIES = ("PT", "ES", "FR", "DE")


def land(landing: Path, *, batches: int, orders: int) -> list[Path]:
    """Write ``batches`` new batch files of ``orders`` orders each; returns their paths."""
    landing.mkdir(parents=True, exist_ok=True)
    first = len(list(landing.glob("batch-*.json"))) + 1
    written = []
    for number in range(first, first + batches):
        rng = random.Random(number)
        day = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=number - 1)
        path = landing / f"batch-{number:05}.json"
        path.write_text("".join(json.dumps({
            "order_id": f"{number:05}-{i:04}", "customer_id": f"c{rng.randrange(500):03}",
            "country": rng.choice(COUNTRIES), "amount": round(rng.uniform(5, 500), 2),
            "ordered_at": (day + timedelta(minutes=i)).isoformat()}) + "\n"
            for i in range(orders)))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.orders_landing")
    parser.add_argument("--landing", default="data/landing/orders")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--orders", type=int, default=1000)
    args = parser.parse_args(argv)
    for path in land(Path(args.landing), batches=args.batches, orders=args.orders):
        print(f"landed {path}")


if __name__ == "__main__":
    main()
