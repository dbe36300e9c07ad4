"""Land nested order documents as JSON files, as an order service would export them.

    python -m jobs.order_documents_landing [--landing DIR] [--batches N] [--orders M]
                                           [--gift-wrap]

Each document holds the customer (with an address), the order lines, each line's
discounts, and tags. ``--gift-wrap`` adds a field to every line, the kind of schema drift
an upstream release brings.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

SKUS = ("apple", "bread", "cheese", "dates", "eggs")


def document(number: int, i: int, *, gift_wrap: bool = False) -> dict:
    """One order document: deterministic for its batch ``number`` and position ``i``."""
    rng = random.Random(number * 100_003 + i)
    lines = []
    for _ in range(rng.randrange(0, 4)):
        line = {"sku": rng.choice(SKUS), "qty": rng.randrange(1, 5),
                "price": round(rng.uniform(1, 20), 2),
                "discounts": [{"code": f"D{rng.randrange(9)}", "amount": rng.randrange(1, 3)}
                              for _ in range(rng.randrange(0, 3))]}
        if gift_wrap:
            line["gift_wrap"] = rng.random() < 0.3
        lines.append(line)
    return {
        "order_id": f"{number:05}-{i:04}",
        "ordered_at": (datetime(2026, 11, 1, tzinfo=UTC)
                       + timedelta(days=number, minutes=i)).isoformat(),
        "customer": {"id": f"c{rng.randrange(500):03}", "name": f"customer {i}",
                     "address": None if rng.random() < 0.2 else
                     {"city": rng.choice(("Porto", "Lyon")), "country": rng.choice(("PT", "FR"))}},
        "lines": lines,
        "tags": rng.sample(("gift", "express", "repeat"), rng.randrange(0, 3)),
    }


def land(landing: Path, *, batches: int, orders: int, gift_wrap: bool = False) -> list[Path]:
    """Write ``batches`` new files of ``orders`` documents each; returns their paths."""
    landing.mkdir(parents=True, exist_ok=True)
    first = len(list(landing.glob("documents-*.json"))) + 1
    written = []
    for number in range(first, first + batches):
        path = landing / f"documents-{number:05}.json"
        path.write_text("".join(json.dumps(document(number, i, gift_wrap=gift_wrap)) + "\n"
                                for i in range(orders)))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.order_documents_landing")
    parser.add_argument("--landing", default="data/landing/order_documents")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--orders", type=int, default=100)
    parser.add_argument("--gift-wrap", action="store_true")
    args = parser.parse_args(argv)
    for path in land(Path(args.landing), batches=args.batches, orders=args.orders,
                     gift_wrap=args.gift_wrap):
        print(f"landed {path}")


if __name__ == "__main__":
    main()
