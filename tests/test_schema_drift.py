"""Landing zones drift: every value lands in its own column or is rescued, never shifted
or dropped (docs/sources.md, "Schema drift")."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from framework.delta import delta_engine, log
from framework.errors import JobFailedError
from framework.ops import actions
from framework.sources.files import schema_drift
from tests.databases import unavailable

RESCUED = schema_drift.RESCUED_COLUMN


def land_json(ws, name: str, records: list[dict]) -> None:
    (ws.landing / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def target_rows(ws, engine: str = "embedded") -> dict[int, dict]:
    df = delta_engine(ws.spark, mode=engine).read(ws.target)
    rows = [r.asDict(recursive=True) for r in df.collect()]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"rows twice: {sorted(ids)}"
    return {r["id"]: r for r in rows}


def _holds(found, value) -> bool:
    """Whether ``found`` (read back) is the landed ``value``, a string column holding any
    value's text."""
    if found == value or (found is not None and value is not None
                          and not isinstance(value, (dict, list)) and str(found) == str(value)):
        return True
    if isinstance(found, str) and isinstance(value, (dict, list)):
        return json.loads(found) == value
    if isinstance(found, dict) and isinstance(value, dict):
        return all(_holds(found.get(k), v) for k, v in value.items())
    if isinstance(found, list) and isinstance(value, list) and len(found) == len(value):
        return all(_holds(f, v) for f, v in zip(found, value, strict=True))
    return False


def assert_every_value_kept(landed: list[dict], rows: dict[int, dict]) -> None:
    """Each landed record is one row, each of its values in its column or rescued."""
    assert sorted(rows) == sorted(r["id"] for r in landed)
    for record in landed:
        row = rows[record["id"]]
        rescued = json.loads(row[RESCUED]) if row[RESCUED] else {}
        for name, value in record.items():
            if value is None:
                continue
            kept = _holds(row.get(name), value) or _holds(rescued.get(name), value) or (
                isinstance(value, dict) and all(
                    _holds((row.get(name) or {}).get(k), v)
                    or _holds(rescued.get(f"{name}.{k}"), v) for k, v in value.items()))
            assert kept, f"id {record['id']}: {name}={value!r} is neither in its column " \
                         f"({row.get(name)!r}) nor rescued ({rescued})"
        if rescued:
            assert rescued["_file_path"].endswith(".json") and rescued["_run_id"]


DRIFTING = [
    [{"id": 1, "amount": 9, "customer": {"name": "ann"}}, {"id": 2, "note": None}],
    # a column, a nested field and an array of structs appear; a number as text, a double
    # for a bigint; a field null in the first files is typed later
    [{"id": 3, "amount": 20.5, "coupon": "X", "customer": {"name": "bob", "tier": "gold"},
      "items": [{"sku": "a"}]},
     {"id": 4, "amount": "4a", "note": {"text": "hi"}}],
    # a name that differs only in case, from the stored one and (a new field) within the
    # run; columns that disappear; a new field of a struct inside an array
    [{"id": 5, "Amount": 5}, {"id": 6, "amount": 1, "items": [{"sku": "b", "qty": 2}],
                              "label": "b"}, {"id": 7, "Label": "c"}],
]


@pytest.mark.compat
@pytest.mark.spark
def test_a_drifting_json_landing_zone_lands_every_value_run_after_run(ws, delta_path):
    ws.declare(merge_schema="true")  # the README's job, with merge_schema=True
    landed: list[dict] = []
    for number, batch in enumerate(DRIFTING, start=1):
        land_json(ws, f"batch-{number}.json", batch)
        report = ws.run()
        landed += batch
        assert_every_value_kept(landed, target_rows(ws))
    assert report.inputs["src"]["files"] == 1
    rows = target_rows(ws)
    assert json.loads(rows[4][RESCUED])["amount"] == "4a" and rows[4]["amount"] is None
    assert rows[6]["items"] == [{"sku": "b", "qty": 2}]
    assert rows[3]["items"] == [{"sku": "a", "qty": None}]
    assert json.loads(rows[5][RESCUED])["Amount"] == 5
    assert rows[7]["Label"] == "c" and json.loads(rows[6][RESCUED])["label"] == "b"
    history = {b.run_seq: b.state for b, counts in ws.store.bookmark_log("copy") if counts}
    assert history[2]["schema_changes"] == ["+ coupon string", "+ customer.tier string",
                                            "+ items array<struct<sku:string>>"]
    assert history[3]["schema_changes"] == ["+ Label string", "+ items[].qty bigint"]
    assert [f["name"] for f in history[3]["schema"]["fields"]] == [
        "amount", "customer", "id", "note", "coupon", "items", "Label"]
    if delta_path == "native":
        return
    # a rewind across the schema changes brings back run 1's schema, and the runs after it
    # evolve it again, exactly once in the target
    actions.rewind(ws.settings, "copy", to_run=history_run_id(ws, 1), restore_targets=True)
    [state] = [b.state for b in ws.store.bookmarks("copy")]
    assert [f["name"] for f in state["schema"]["fields"]] == ["amount", "customer", "id",
                                                               "note"]
    ws.run()
    assert_every_value_kept(landed, target_rows(ws))


def history_run_id(ws, run_seq: int) -> str:
    [run_id] = [r.run_id for r in ws.store.runs("copy") if r.run_seq == run_seq]
    return run_id


#: JSON lines the driver infers as Spark does (each case a file), and, LEFT_TO_SPARK, lines
#: it leaves to Spark (Python's parser reads them otherwise, or Spark's rules are its own)
JSON_CASES: dict[str, list[str]] = {
    "numbers": ['{"a":1,"b":2.5,"c":-0,"d":1E5,"e":NaN,"f":-Infinity,"g":1e400}'],
    "bigint to decimal": ['{"a":9223372036854775807,"b":-9223372036854775809}',
                          '{"a":9223372036854775808,"c":123456789012345678901234}',
                          '{"c":5,"d":123456789012345678901234}', '{"d":5.5}'],
    "conflicts": ['{"a":1}', '{"a":"x"}', '{"b":true,"c":{"x":1}}', '{"b":1,"c":[1]}'],
    "nested": ['{"s":{"z":1,"a":{"q":[1,2.0]}},"t":[{"x":1},{"y":"2"}],"u":[[1],[2.5]]}',
               '{"s":{"m":null,"z":"t"},"v":[],"w":[null],"n":null}'],
    "names": ['{"a":1,"A":"x","B":1,"_u":2,"Z":3,"é":1,"éx":2,"日本":1,"\\ud83d\\ude00":1,'
              '"\\uffff":1}'],
    "blank lines and separators": ['', '  ', '{"a":1}\r\n{"b":2}\r{"c":3}', '\t'],
    "no record": [''],
    "single quotes": ["{'a':1}"],
    "duplicate keys": ['{"a":1,"a":2}'],
    "top-level array": ['[{"a":1}]'],
    "not an object": ['5'],
    "empty object": ['{"a":1,"b":{}}'],
    "empty name": ['{"":1}'],
    "malformed": ['{"a":1'],
}
LEFT_TO_SPARK = {"single quotes", "duplicate keys", "top-level array", "not an object",
                 "empty object", "empty name", "malformed"}


@pytest.mark.compat
@pytest.mark.spark
def test_json_schemas_are_inferred_on_the_driver_as_spark_infers_them(spark, tmp_path):
    from framework.sources.files import json_schema
    from framework.sources.files.listed_reads import ListedFile
    from framework.spark.session import temporary_conf

    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
    for name, lines in JSON_CASES.items():
        path = tmp_path / f"{name}.json"
        path.write_text("\n".join(lines) + "\n", newline="")
        found = json_schema.infer([ListedFile(str(path), path.stat().st_size, 0)], options)
        if name in LEFT_TO_SPARK:
            assert found is None, name
            continue
        with temporary_conf(spark, {"spark.sql.caseSensitive": "true"}):
            assert found == spark.read.options(**options).json(str(path)).schema, name
    # files merged; more than DRIVER_BYTES, compressed, or with reader options: Spark's
    files = [ListedFile(str(tmp_path / f"{name}.json"), 1, 0) for name in ("nested", "names")]
    assert json_schema.infer(files, {}) is not None
    assert json_schema.infer(files, {"multiLine": "true"}) is None
    assert json_schema.infer([ListedFile("x.json.gz", 1, 0)], {}) is None
    assert json_schema.infer([ListedFile("x.json", json_schema.DRIVER_BYTES + 1, 0)], {}) is None


@pytest.mark.compat
@pytest.mark.spark
def test_a_first_run_beyond_the_drivers_bounds_infers_from_a_sample_and_loses_nothing(
        ws, monkeypatch):
    from framework.sources.files import json_schema

    # eight files are "a million": the sample is files 0 and 4
    monkeypatch.setattr(json_schema, "DRIVER_FILES", 4)
    monkeypatch.setattr(json_schema, "SAMPLE_FILES", 2)
    ws.declare(merge_schema="true")
    drift = {1: {"coupon": "C", "s": {"x": 1, "tier": "gold"}},
             2: {"amount": "4a", "items": [{"k": 2, "q": 3}]},
             5: {"s": "flat"}, 6: {"amount": 2.5, "m": {"a": [1]}}}
    for i in range(8):
        record = {"id": i, "amount": i, "s": {"x": i}, "items": [{"k": i}]} | drift.get(i, {})
        land_json(ws, f"{i}.json", [record])
    (ws.landing / "7.json").write_text('\n{"id": 7}\n  \n \t \r\n')  # blank lines
    report = ws.run()
    assert "first read, its schema inferred from a sample" in report.schema_changes["src"][0]
    rows = target_rows(ws)
    assert sorted(rows) == list(range(8))
    rescued = {i: {k: v for k, v in json.loads(r[RESCUED]).items()
                   if not k.startswith("_")} for i, r in rows.items() if r[RESCUED]}
    assert rescued == {1: {"coupon": "C", "s.tier": "gold"},
                       2: {"amount": "4a", "items[0].q": "3"},
                       5: {"s": "flat"}, 6: {"amount": "2.5", "m": '{"a":[1]}'}}
    assert (rows[2]["amount"], rows[5]["s"], rows[6]["amount"]) == (None, None, None)
    assert rows[3] == {"id": 3, "amount": 3, "s": {"x": 3}, "items": [{"k": 3}],
                       RESCUED: None}
    # a later run within the driver's bounds adds what it brings, as columns
    land_json(ws, "8.json", [{"id": 8, "coupon": "D"}])
    ws.run()
    assert target_rows(ws)[8]["coupon"] == "D"


@pytest.mark.spark
@pytest.mark.native
def test_parquet_files_are_read_by_name_and_their_types_widen(ws, spark):
    from framework.delta import native_available

    if not native_available(spark):
        unavailable("native Delta path: Delta's jars are not on this Spark session (type "
                    "widening is delta-spark's; bash .ci/setup.sh resolves them with mvn)")
    ws.declare(merge_schema="true", format="parquet")
    spark.sql(f"CREATE TABLE delta.`{ws.target}` (id INT, a STRING) USING delta "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")

    def land(name: str, ids: pa.Array, **columns: list) -> None:
        pq.write_table(pa.table({"id": ids, **columns}), ws.landing / name)

    # one run, two layouts: a column of one file only is kept
    land("1.parquet", pa.array([1], pa.int32()), a=["x"])
    land("2.parquet", pa.array([2], pa.int32()), a=["y"], extra=[7])
    ws.declare(merge_schema="true", format="parquet")
    ws.run()
    # int32 -> int64 widens the column (Delta's type widening); 'extra' disappears
    land("3.parquet", pa.array([3_000_000_000], pa.int64()), a=["z"])
    ws.run()
    # int64 -> double: 5.0 fits, 4.5 is rescued
    land("4.parquet", pa.array([4.5, 5.0], pa.float64()), a=["v", "w"])
    report = ws.run()
    assert report.inputs["src"]["rescued"] == 1
    rows = target_rows(ws, engine="native")
    assert {i: (r["a"], r["extra"]) for i, r in rows.items() if i} == {
        1: ("x", None), 2: ("y", 7), 3_000_000_000: ("z", None), 5: ("w", None)}
    [rescued] = [json.loads(r[RESCUED]) for r in rows.values() if r[RESCUED]]
    assert rescued["id"] == 4.5 and rescued["_file_path"].endswith("4.parquet")
    assert dict(ws.spark.read.format("delta").load(ws.target).dtypes)["id"] == "bigint"


@pytest.mark.compat
@pytest.mark.spark
def test_csv_files_are_matched_by_header_name_whatever_the_order_or_case(ws):
    ws.declare(merge_schema="true", format="csv", schema_hints="amount INT",
               **{"option.header": "true"})
    (ws.landing / "1.csv").write_text("id,name,amount\n1,ann,5\n")
    (ws.landing / "2.csv").write_text("AMOUNT,Id,name\n7,2,bob\n")
    ws.run()
    # a column in the middle; a value that does not fit the hinted type
    (ws.landing / "3.csv").write_text("id,note,name,amount\n3,hello,cy,9\n4,,dee,n/a\n")
    ws.run()
    rows = {int(r["id"]): r for r in target_rows_as_text(ws)}
    assert {i: (r["name"], r["amount"], r["note"]) for i, r in rows.items()} == {
        1: ("ann", 5, None), 2: ("bob", 7, None), 3: ("cy", 9, "hello"), 4: ("dee", None, None)}
    assert json.loads(rows[4][RESCUED])["amount"] == "n/a"
    assert [i for i, r in rows.items() if r[RESCUED]] == [4]


def target_rows_as_text(ws) -> list[dict]:
    return [r.asDict() for r in delta_engine(ws.spark, mode="embedded").read(ws.target)
            .collect()]


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["rescue", "fail_on_new_columns", "none"])
def test_each_evolution_mode_does_what_it_says_with_a_new_column(ws, mode):
    ws.declare(merge_schema="true", schema_evolution=mode)
    land_json(ws, "1.json", [{"id": 1, "a": "x"}])
    ws.run()
    land_json(ws, "2.json", [{"id": 2, "a": "y", "b": 3}])
    if mode == "fail_on_new_columns":
        with pytest.raises(JobFailedError) as failed:
            ws.run()
        assert "new column(s) b in 1 file" in str(failed.value)
        assert str(ws.landing / "2.json") in str(failed.value)
        ws.declare(merge_schema="true", schema_evolution="add_new_columns")
    report = ws.run()
    rows = target_rows(ws)
    assert report.inputs["src"]["files"] == 1 and sorted(rows) == [1, 2]
    if mode == "rescue":  # rescued, and said so: not 'left out' under another mode
        assert "b" not in rows[2] and json.loads(rows[2][RESCUED])["b"] == 3
        assert report.schema_changes["src"] == [
            "new, kept out of the schema (schema_evolution='rescue'): b",
            f"b: 1 value rescued to {RESCUED}"]
        assert "new_columns_left_out" not in report.inputs["src"]
    elif mode == "none":
        assert "b" not in rows[2] and rows[2][RESCUED] is None
        assert report.inputs["src"]["new_columns_left_out"] == 1
        assert report.schema_changes["src"] == ["left out (schema_evolution='none'): b"]
    else:
        assert rows[2]["b"] == 3


def test_safe_widenings_widen_the_stored_schema_and_others_keep_it():
    from pyspark.sql.types import (
        DecimalType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def schema(**types) -> StructType:
        return StructType([StructField(n, t) for n, t in types.items()])

    stored = schema(a=IntegerType(), b=LongType(), c=DecimalType(5, 2), d=StringType())
    drift = schema_drift.evolve(stored, schema(a=LongType(), b=DoubleType(),
                                               c=DecimalType(7, 3), d=LongType(),
                                               e=StringType()), "add_new_columns")
    assert drift.schema == schema(a=LongType(), b=LongType(), c=DecimalType(7, 3),
                                  d=StringType(), e=StringType())
    assert drift.changes == ("a int -> bigint", "c decimal(5,2) -> decimal(7,3)",
                             "+ e string")
    kept = schema_drift.evolve(stored, schema(a=LongType(), e=StringType()), "rescue")
    assert kept.schema == stored and kept.new == ("e",)
    assert schema_drift.first_schema([schema(a=IntegerType()), schema(a=StringType()),
                                      schema(A=LongType())]) == schema(a=StringType())
    # a new field in two cases in one run's files: the first case is the column
    assert schema_drift.first_schema([schema(B=LongType(), b=StringType())]) == schema(
        B=LongType())
    assert schema_drift.evolve(stored, schema(E=LongType(), e=StringType()),
                               "add_new_columns").changes == ("+ E bigint",)
    assert schema_drift.case_clashes(schema(a=IntegerType(), A=LongType()))


def test_a_bookmark_says_its_schema_and_what_its_run_changed():
    from framework.sources.files import FileState

    state = FileState(schema={"type": "struct", "fields": [
        {"name": "id", "type": "long"},
        {"name": "items", "type": {"type": "array", "elementType": {
            "type": "struct", "fields": [{"name": "sku", "type": "string"}]}}}]},
        schema_changes=("+ items[].sku string",))
    assert dict(state.describe())["schema"] == "id long, items array<struct<sku:string>>"
    assert dict(state.describe())["schema changes"] == "+ items[].sku string"


@pytest.mark.spark
def test_an_empty_first_file_then_real_ones_land_every_row_with_no_edit(ws):
    ws.declare()  # the README's job as a user writes it first: no merge_schema
    (ws.landing / "0.json").touch()  # a producer touched the file before writing it
    ws.run()
    assert not log.is_table(ws.target)  # no table of the rescued-data column alone
    land_json(ws, "1.json", [{"id": 1, "amount": 2.5}])
    ws.run()
    assert target_rows(ws) == {1: {"id": 1, "amount": 2.5, RESCUED: None}}
    # a target an earlier deltamark made of the rescued-data column alone takes the first
    # real columns
    made = str(ws.root / "lake" / "made_empty")
    delta_engine(ws.spark, mode="embedded").write(
        ws.spark.createDataFrame([], f"{RESCUED} STRING"), made)
    ws.declare("copy_to_made", target=made, ctx="src2")
    ws.run("copy_to_made")
    assert [r.asDict() for r in delta_engine(ws.spark, mode="embedded").read(made)
            .collect()] == [{RESCUED: None, "amount": 2.5, "id": 1}]


#: (value, its type, the type wanted, what it converts to: None where it does not fit)
CONVERSIONS = [
    ("19.99", "STRING", "DECIMAL(10,2)", Decimal("19.99")),
    ("5.5", "STRING", "DECIMAL(10,2)", Decimal("5.50")),
    ("7", "STRING", "DECIMAL(10,2)", Decimal("7.00")),
    ("1e3", "STRING", "DECIMAL(10,2)", Decimal("1000.00")),
    ("5.555", "STRING", "DECIMAL(10,2)", None),  # rounding loses a digit
    ("123456789012", "STRING", "DECIMAL(10,2)", None),
    ("1.50", "STRING", "DOUBLE", 1.5),
    (" 7", "STRING", "INT", 7), ("+7", "STRING", "INT", 7), ("09", "STRING", "INT", 9),
    ("7.5", "STRING", "INT", None), ("4a", "STRING", "INT", None),
    ("99999999999", "STRING", "INT", None),
    ("2024-01-02T03:04:05", "STRING", "TIMESTAMP", datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02T03:04:05Z", "STRING", "TIMESTAMP", datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 05:04:05+02:00", "STRING", "TIMESTAMP", datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-13-01", "STRING", "TIMESTAMP", None),
    ("2024-01-02", "STRING", "DATE", date(2024, 1, 2)),
    ("2024-01-02T03:04:05", "STRING", "DATE", None),  # the time of day would be lost
    ("2024-13-01", "STRING", "DATE", None),
    ("TRUE", "STRING", "BOOLEAN", True), ("maybe", "STRING", "BOOLEAN", None),
    (20.5, "DOUBLE", "BIGINT", None), (20.0, "DOUBLE", "BIGINT", 20),
    (5.5, "DOUBLE", "DECIMAL(10,2)", Decimal("5.50")),
    (2 ** 40, "BIGINT", "INT", None),
]


@pytest.mark.compat
@pytest.mark.spark
def test_a_value_fits_a_type_it_converts_to_whole_in_whatever_form(spark):
    from framework.spark.types import Conversion

    def parsed(ddl: str):
        return spark.createDataFrame([], f"v {ddl}").schema[0].dataType

    columns = []
    for i, (value, given, wanted, _) in enumerate(CONVERSIONS):
        ref = f"CAST({value!r} AS {given})"
        conversion = Conversion()
        converted = conversion.convert(ref, parsed(given), parsed(wanted), "v")
        columns += [f"{converted} AS c{i}", f"{conversion.misfits[0].condition} AS m{i}"]
    [row] = spark.sql("SELECT 1").selectExpr(*columns).collect()
    found = [(value, wanted, row[f"c{i}"], row[f"m{i}"])
             for i, (value, _, wanted, _) in enumerate(CONVERSIONS)]
    assert found == [(value, wanted, local(converted), converted is None)
                     for value, _, wanted, converted in CONVERSIONS]


def local(value):
    """A UTC time as pyspark collects it (the session's zone is UTC; Python's, the
    machine's)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).astimezone().replace(tzinfo=None)
    return value


@pytest.mark.spark
def test_hinted_and_stored_types_keep_the_values_that_convert(ws):
    ws.declare(merge_schema="true", schema_hints=(
        "price DECIMAL(10,2), at TIMESTAMP, qty INT, ok BOOLEAN, user.dob DATE"))
    land_json(ws, "1.json", [
        {"id": 1, "price": "5.5", "at": "2024-01-02T03:04:05Z", "qty": "+7", "ok": "true",
         "user": {"dob": "2001-02-03"}, "n": 5},
        {"id": 2, "price": "4a", "at": "2024-13-01", "qty": "7.5", "ok": "maybe",
         "user": {"dob": "2001-02-03T10:00:00"}, "n": 6}])
    ws.run()
    land_json(ws, "2.json", [{"id": 3, "n": "7"}, {"id": 4, "n": "7.5"}])  # n is bigint now
    report = ws.run()
    rows = target_rows(ws)
    assert (rows[1]["price"], rows[1]["qty"], rows[1]["ok"], rows[1]["user"]["dob"],
            rows[1][RESCUED]) == (Decimal("5.50"), 7, True, date(2001, 2, 3), None)
    assert rows[1]["at"] == local(datetime(2024, 1, 2, 3, 4, 5))
    assert {k: v for k, v in json.loads(rows[2][RESCUED]).items()
            if not k.startswith("_")} == {"price": "4a", "at": "2024-13-01", "qty": "7.5",
                                          "ok": "maybe", "user.dob": "2001-02-03T10:00:00"}
    assert (rows[3]["n"], rows[3][RESCUED], rows[4]["n"]) == (7, None, None)
    assert json.loads(rows[4][RESCUED])["n"] == "7.5"
    assert report.schema_changes["src"] == [f"n: 1 value rescued to {RESCUED}"]


@pytest.mark.spark
def test_a_csv_file_s_first_line_is_its_header_unless_the_job_says_otherwise(ws):
    ws.declare(merge_schema="true", format="csv", schema_hints="amount DECIMAL(10,2)")
    (ws.landing / "1.csv").write_text("id,name,amount\n1,ann,5.5\n2,bob,7\n")
    ws.run()
    rows = {int(r["id"]): r for r in target_rows_as_text(ws)}
    assert {i: (r["name"], r["amount"], r[RESCUED]) for i, r in rows.items()} == {
        1: ("ann", Decimal("5.50"), None), 2: ("bob", Decimal("7.00"), None)}
    ws.declare("headless", format="csv", ctx="headless", target=str(ws.root / "headless"),
               **{"option.header": "false"})
    ws.run("headless")
    assert sorted(r["_c0"] for r in delta_engine(ws.spark, mode="embedded").read(
        str(ws.root / "headless")).collect()) == ["1", "2", "id"]


def test_schema_hints_name_nested_fields_and_refuse_what_they_cannot(spark):
    from pyspark.sql.types import DateType, DecimalType, LongType, StructField, StructType

    hints = schema_drift.parse_hints(spark, "Price DECIMAL(10, 2), user.`dob` DATE, "
                                            "`a.b`.c DATE")
    assert [(h.path, h.data_type) for h in hints] == [
        (("Price",), DecimalType(10, 2)), (("user", "dob"), DateType()),
        (("a.b", "c"), DateType())]
    inferred = StructType([StructField("price", LongType()), StructField("user", StructType(
        [StructField("dob", LongType()), StructField("zip", LongType())]))])
    schema, changes = schema_drift.hinted(inferred, hints)
    assert schema == StructType([
        StructField("price", DecimalType(10, 2)),
        StructField("user", StructType([StructField("dob", DateType()),
                                        StructField("zip", LongType())])),
        StructField("a.b", StructType([StructField("c", DateType())]))])
    assert changes == ("Price bigint -> decimal(10,2) (schema_hints)",
                       "user.dob bigint -> date (schema_hints)")
    with pytest.raises(ValueError, match=r"^schema_hints: price.x: price is bigint, not a "
                                         r"struct"):
        schema_drift.hinted(inferred, schema_drift.parse_hints(spark, "price.x INT"))
    with pytest.raises(ValueError, match=r"^schema_hints: 'price' is not '<column> <type>'"):
        schema_drift.parse_hints(spark, "price")
    with pytest.raises(ValueError, match=r"^schema_hints 'price NUMBERISH': "):
        schema_drift.parse_hints(spark, "price NUMBERISH")
