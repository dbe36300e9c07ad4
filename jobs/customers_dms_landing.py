"""Land a customers table's changes the way AWS DMS writes them to S3, for
jobs/customers_cdc.py.

    python -m jobs.customers_dms_landing --landing DIR --full-load [--customers N]
    python -m jobs.customers_dms_landing --landing DIR [--changes M] [--seed S]

DMS's CSV target with ``AddColumnName=true`` and ``TimestampColumnName=dms_ts``: the full
load is ``LOAD00000001.csv`` (no ``Op`` column), then each change file
(``20261203-101500123.csv``) holds inserts, updates and deletes (``Op`` I, U, D) in commit
order, several changes of one customer among them. ``Source`` plays the database: it
applies each change it lands, so a test can compare the lake table with it.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

COLUMNS = ("dms_ts", "id", "name", "email", "tier")
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@dataclass
class Source:
    """The customers table DMS replicates: its rows by id, and the clock of its commits."""

    landing: Path
    rows: dict[int, dict[str, str]] = field(default_factory=dict)
    #: every change ever landed, as (id, dms_ts, Op, row): a table's full history
    changes: list[tuple[int, str, str, dict[str, str]]] = field(default_factory=list)
    clock: int = 0  # milliseconds after START

    @classmethod
    def at(cls, landing: Path) -> Source:
        """The source whose changes ``landing`` holds (a new one if none)."""
        state = _state(landing)
        if not state.exists():
            return cls(landing)
        saved = json.loads(state.read_text())
        return cls(landing, {int(k): v for k, v in saved["rows"].items()},
                   [tuple(c) for c in saved["changes"]], saved["clock"])  # type: ignore[misc]

    def full_load(self, customers: int) -> Path:
        """Insert ``customers`` rows and land them as DMS's full load."""
        rows = [self._apply(i, "I", self._customer(i, random.Random(i))) for i in
                range(1, customers + 1)]
        return self._land("LOAD00000001.csv", [{k: v for k, v in r.items() if k != "Op"}
                                               for r in rows], with_op=False)

    def change_file(self, changes: int, *, seed: int) -> Path:
        """Commit ``changes`` random inserts, updates and deletes; land them as one file."""
        rng = random.Random(seed)
        rows = []
        for _ in range(changes):
            live = sorted(self.rows)
            if not live or rng.random() < 0.2:
                key = max([*self.rows, *(c[0] for c in self.changes), 0]) + 1
                rows.append(self._apply(key, "I", self._customer(key, rng)))
            elif rng.random() < 0.15:
                key = rng.choice(live)
                rows.append(self._apply(key, "D", dict(self.rows[key])))
            else:
                key = rng.choice(live)
                rows.append(self._apply(key, "U", {**self.rows[key],
                                                  "tier": rng.choice(("gold", "silver")),
                                                  "email": f"c{key}.{self.clock}@x.io"}))
        return self._land(f"{(START + timedelta(milliseconds=self.clock)):%Y%m%d-%H%M%S%f}"
                          [:-3] + ".csv", rows, with_op=True)

    def _customer(self, key: int, rng: random.Random) -> dict[str, str]:
        return {"id": str(key), "name": f"customer {key}", "email": f"c{key}@x.io",
                "tier": rng.choice(("bronze", "silver"))}

    def _apply(self, key: int, op: str, row: dict[str, str]) -> dict[str, str]:
        self.clock += 1
        stamp = f"{START + timedelta(milliseconds=self.clock):%Y-%m-%d %H:%M:%S.%f}"
        if op == "D":
            self.rows.pop(key)
        else:
            self.rows[key] = row
        self.changes.append((key, stamp, op, row))
        return {"Op": op, "dms_ts": stamp, **row}

    def _land(self, name: str, rows: list[dict[str, str]], *, with_op: bool) -> Path:
        self.landing.mkdir(parents=True, exist_ok=True)
        path = self.landing / name
        with path.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=(("Op",) if with_op else ()) + COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        _state(self.landing).write_text(json.dumps(
            {"rows": self.rows, "changes": self.changes, "clock": self.clock}))
        return path


def history(changes: list[tuple[int, str, str, dict[str, str]]]
            ) -> set[tuple[int, str, datetime, datetime | None]]:
    """The SCD type 2 rows of ``Source.changes``: (id, email, start, end), end None on a
    customer's current row."""
    by_key: dict[int, list[tuple[int, str, str, dict[str, str]]]] = {}
    for change in sorted(changes, key=lambda c: c[1]):
        by_key.setdefault(change[0], []).append(change)
    rows = set()
    for events in by_key.values():
        for (key, stamp, op, row), following in zip(events, [*events[1:], None], strict=True):
            if op != "D":
                rows.add((key, row["email"], _time(stamp),
                          _time(following[1]) if following else None))
    return rows


def _time(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f")


def _state(landing: Path) -> Path:
    """Where the source's rows and clock are kept: beside the landing, not in it."""
    return landing.parent / f"{landing.name}.source.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--landing", type=Path, default=Path("data/landing/dms/customers"))
    parser.add_argument("--full-load", action="store_true")
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    source = Source.at(args.landing)
    path = (source.full_load(args.customers) if args.full_load
            else source.change_file(args.changes, seed=args.seed))
    print(f"landed {path}")


if __name__ == "__main__":
    main()
