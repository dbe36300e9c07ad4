"""Change records applied to Delta tables (``mode="apply_changes"``): random but valid
change histories (insert, updates, delete, insert again...) of many keys, shuffled over
runs so that changes arrive late and out of order, with duplicates; the table must end as
a reference applying every change at once says (SCD 1: each key's latest state; SCD 2:
its whole history).

The planning is Spark's on both paths, only the MERGE differs: these run on the embedded
path (seconds), test_example_jobs.py's DMS job applies changes on the native one."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from framework.delta import AppTransaction, delta_engine
from framework.delta.changes import ApplyChanges, forget_tombstones, tombstones_path
from framework.delta.log import is_table
from framework.errors import ChangeRecordsError

COLUMNS = "id INT, name STRING, ts INT, Op STRING"


def histories(keys: int, seed: int) -> list[tuple[int, str, int, str]]:
    """Valid lifecycles: per key I, some U, maybe D, maybe I again...; (id, name, ts, Op),
    each change's ``name`` its own."""
    rng = random.Random(seed)
    changes = []
    for key in range(1, keys + 1):
        ts, alive = rng.randint(0, 3), False
        for _ in range(rng.randint(1, 6)):
            op = "D" if alive and rng.random() < 0.3 else ("U" if alive else "I")
            changes.append((key, f"k{key}-t{ts}", ts, op))
            alive, ts = op != "D", ts + rng.randint(1, 3)
    return changes


def runs_of(changes: list, runs: int, seed: int) -> list[list]:
    """``changes`` shuffled into ``runs`` batches, a tenth of them twice (a replayed file)."""
    rng = random.Random(seed)
    shuffled = changes + rng.sample(changes, len(changes) // 10)
    rng.shuffle(shuffled)
    return [shuffled[i::runs] for i in range(runs)]


def latest_states(changes: list) -> set[tuple]:
    latest: dict[int, tuple] = {}
    for change in sorted(set(changes), key=lambda c: c[2]):
        latest[change[0]] = change
    return {(k, name, ts) for k, name, ts, op in latest.values() if op != "D"}


def full_history(changes: list) -> set[tuple]:
    rows = set()
    by_key: dict[int, list] = {}
    for change in sorted(set(changes), key=lambda c: c[2]):
        by_key.setdefault(change[0], []).append(change)
    for events in by_key.values():
        for event, following in zip(events, [*events[1:], None], strict=True):
            if event[3] != "D":
                rows.add((event[0], event[1], event[2], event[2],
                          following[2] if following else None))
    return rows


def apply(engine, spark, path, batches, changes: ApplyChanges) -> None:
    for seq, batch in enumerate(batches, 1):
        engine.write(spark.createDataFrame(batch, COLUMNS), path, mode="apply_changes",
                     changes=changes, txn=AppTransaction("deltamark:cdc", seq))


@pytest.fixture
def engine(spark):
    return delta_engine(spark, mode="embedded")


SCD1 = ApplyChanges(keys=("id",), sequence_by=("ts",), apply_as_deletes="Op = 'D'",
                    except_columns=("Op",))


def test_latest_change_of_each_key_wins_across_late_and_repeated_changes(
        engine, spark, tmp_path):
    changes = histories(40, seed=7)
    batches = runs_of(changes, 3, seed=7)
    path = str(tmp_path / "customers")
    apply(engine, spark, path, batches, SCD1)
    rows = {tuple(r) for r in engine.read(path).collect()}
    assert rows == latest_states(changes)
    assert engine.read(path).columns == ["id", "name", "ts"]
    # a replay of a landed run changes nothing
    engine.write(spark.createDataFrame(batches[0], COLUMNS), path, mode="apply_changes",
                 changes=SCD1, txn=AppTransaction("deltamark:cdc", 1))
    assert {tuple(r) for r in engine.read(path).collect()} == rows

    history = ApplyChanges(keys=("id",), sequence_by=("ts",), apply_as_deletes="Op = 'D'",
                           except_columns=("Op",), scd_type=2)
    path = str(tmp_path / "customers_history")
    apply(engine, spark, path, batches, history)
    rows = {tuple(r) for r in engine.read(path).collect()}
    assert rows == full_history(changes)
    assert engine.read(path).columns == ["id", "name", "ts", "__START_AT", "__END_AT"]


def test_tombstones_keep_a_deleted_row_away_until_retention_or_a_discarded_run(
        engine, spark, tmp_path):
    path = str(tmp_path / "t")
    runs = [[(1, "a", 1, "I"), (2, "b", 1, "I")], [(1, None, 5, "D")], [(1, "late", 3, "U")]]
    apply(engine, spark, path, runs, SCD1)
    assert {tuple(r) for r in engine.read(path).collect()} == {(2, "b", 1)}
    # the run that wrote the tombstone is forgotten (as a discarded run is): the late
    # change comes back; past the retention, so does a tombstone's effect
    forget_tombstones(tombstones_path(path), "deltamark:cdc", from_run=2)
    engine.write(spark.createDataFrame([(1, "late", 4, "U")], COLUMNS), path,
                 mode="apply_changes", changes=SCD1, txn=AppTransaction("deltamark:cdc", 4))
    assert {tuple(r) for r in engine.read(path).collect()} == {(2, "b", 1), (1, "late", 4)}
    engine.write(spark.createDataFrame([(2, None, 9, "D")], COLUMNS), path,
                 mode="apply_changes", changes=SCD1, txn=AppTransaction("deltamark:cdc", 5))
    brief = ApplyChanges(**{**SCD1.__dict__, "tombstone_retention": timedelta(microseconds=1)})
    engine.write(spark.createDataFrame([(2, "older", 8, "U")], COLUMNS), path,
                 mode="apply_changes", changes=brief, txn=AppTransaction("deltamark:cdc", 6))
    assert (2, "older", 8) in {tuple(r) for r in engine.read(path).collect()}
    assert is_table(tombstones_path(path))


@pytest.mark.parametrize(("options", "rows", "message"), [
    (SCD1, [(None, "a", 1, "I")], "id is NULL in a change (id=None, ts=1)"),
    (SCD1, [(1, "a", None, "I")], "ts is NULL in a change"),
    (ApplyChanges(keys=("key",), sequence_by=("ts",)), [(1, "a", 1, "I")],
     "keys column(s) ['key'] are not in the changes"),
    (ApplyChanges(keys=("id",), sequence_by=("ts",), apply_as_deletes="Opp = 'D'"),
     [(1, "a", 1, "I")], "apply_as_deletes=\"Opp = 'D'\" is not a condition"),
    (ApplyChanges(keys=("id",), sequence_by=("ts",), except_columns=("ts",)),
     [(1, "a", 1, "I")], "except_columns ['ts']: the table keeps the keys"),
])
def test_bad_options_and_changes_fail_in_one_line(engine, spark, tmp_path, options, rows,
                                                  message):
    path = str(tmp_path / "t")
    with pytest.raises(ChangeRecordsError, match="apply_changes") as error:
        engine.write(
            spark.createDataFrame(rows, COLUMNS), path, mode="apply_changes", changes=options)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not is_table(path)


#: docs/jobs.md's Debezium recipe: the envelope's schema (a file of snapshot reads only
#: would infer ``before`` as a string), and an envelope per change (``before``, ``after``,
#: ``op`` c/u/d/r, ``source``) as one row of the key, the row's values and the order
ROW = "id BIGINT, email STRING"
ENVELOPE = (f"before STRUCT<{ROW}>, after STRUCT<{ROW}>, op STRING, "
            "source STRUCT<ts_ms: BIGINT, lsn: BIGINT>")


def debezium_changes(events):
    from pyspark.sql import functions as F

    return events.select(F.coalesce("after.id", "before.id").alias("id"), "after.email",
                         "op", "source.ts_ms", "source.lsn")


def test_debezium_envelopes_in_commit_order(engine, spark, tmp_path):
    import json

    def event(op, before, after, ts_ms, lsn):
        return json.dumps({"before": before, "after": after, "op": op, "ts_ms": ts_ms + 5,
                           "source": {"connector": "postgresql", "db": "shop", "table":
                                      "customers", "ts_ms": ts_ms, "lsn": lsn}})

    a1, a2, b1 = {"id": 1, "email": "a@x"}, {"id": 1, "email": "a2@x"}, {"id": 2, "email": "b@x"}
    files = [  # the snapshot, then changes; one transaction (same ts_ms) updates twice
        [event("r", None, a1, 100, 10), event("r", None, b1, 100, 11)],
        [event("u", a1, {"id": 1, "email": "a1@x"}, 200, 20), event("u", a1, a2, 200, 21),
         event("c", None, {"id": 3, "email": "c@x"}, 200, 22)],
        [event("d", b1, None, 300, 30), event("u", a1, {"id": 1, "email": "old"}, 150, 15)],
    ]
    options = ApplyChanges(keys=("id",), sequence_by=("ts_ms", "lsn"),
                           apply_as_deletes="op = 'd'", except_columns=("op",))
    path = str(tmp_path / "customers")
    for seq, lines in enumerate(files, 1):
        landed = tmp_path / f"events-{seq}.json"
        landed.write_text("\n".join(lines))
        engine.write(debezium_changes(spark.read.json(str(landed), schema=ENVELOPE)), path,
                     mode="apply_changes", changes=options,
                     txn=AppTransaction("deltamark:debezium", seq))
    assert {(r.id, r.email, r.lsn) for r in engine.read(path).collect()} == {
        (1, "a2@x", 21), (3, "c@x", 22)}


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_delete_of_a_not_null_table_needs_only_its_key(engine, spark, tmp_path, scd_type):
    """A delete carries only its key (Debezium's before image without REPLICA IDENTITY
    FULL): the table's NOT NULL columns hold for rows written, not for rows deleted."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from framework.errors import ConstraintViolationError

    path = str(tmp_path / "customers")
    held = {"id": [1, 2], "name": ["a", "b"], "ts": [1, 1]}
    fields = [pa.field("id", pa.int32(), False), pa.field("name", pa.string(), False),
              pa.field("ts", pa.int32(), False)]
    if scd_type == 2:
        held |= {"__START_AT": [1, 1], "__END_AT": [None, None]}
        fields += [pa.field("__START_AT", pa.int32()), pa.field("__END_AT", pa.int32())]
    write_deltalake(path, pa.table(held, schema=pa.schema(fields)))
    options = ApplyChanges(keys=("id",), sequence_by=("ts",), apply_as_deletes="Op = 'D'",
                           except_columns=("Op",), scd_type=scd_type)
    apply(engine, spark, path, [[(2, None, 2, "D")]], options)
    rows = engine.read(path).collect()
    assert [(r.id, r.name) for r in rows if scd_type == 1 or r["__END_AT"] is None] == [
        (1, "a")]  # SCD 2: b's row closed at the delete, its name kept
    with pytest.raises(ConstraintViolationError, match="name"):
        engine.write(spark.createDataFrame([(3, None, 3, "I")], COLUMNS), path,
                     mode="apply_changes", changes=options,
                     txn=AppTransaction("deltamark:cdc", 2))
