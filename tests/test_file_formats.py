"""Every file format, read incrementally by a real job: two batches, then a third."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from framework.delta import delta_engine
from framework.errors import JobFailedError
from framework.sources import files
from framework.spark.lines import lacking
from tests.databases import unavailable

AVRO_SCHEMA = {
    "type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}]}]},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 9, "scale": 2}},
    ]}


def write_batch(fmt: str, path: Path, ids: list[int]) -> None:
    if fmt == "json":
        path.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    elif fmt == "csv":
        path.write_text("id\n" + "".join(f"{i}\n" for i in ids))
    elif fmt == "text":
        path.write_text("".join(f"{i}\n" for i in ids))
    elif fmt == "xml":
        path.write_text("<orders>" + "".join(f"<order><id>{i}</id></order>" for i in ids)
                        + "</orders>")
    elif fmt == "parquet":
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    elif fmt == "orc":
        orc.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    elif fmt == "avro":
        import fastavro

        records = [{"id": i, "tags": ["a", str(i)], "address": {"city": "Lisboa"} if i % 2
                    else None, "status": "PAID",
                    "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "amount": Decimal("12.50")}
                   for i in ids]
        with open(path, "wb") as out:
            fastavro.writer(out, fastavro.parse_schema(AVRO_SCHEMA), records)


PARAMS = {
    "json": {}, "parquet": {}, "orc": {}, "avro": {},
    "csv": {"option.header": "true", "option.inferSchema": "true"},
    "text": {},
    "xml": {"option.rowTag": "order"},
}


@pytest.mark.compat
@pytest.mark.parametrize("fmt", list(PARAMS))
def test_each_format_is_read_incrementally(ws, spark, fmt):
    ws.declare(format=fmt, **PARAMS[fmt])
    write_batch(fmt, ws.landing / f"b1.{fmt}", [1, 2])
    write_batch(fmt, ws.landing / f"b2.{fmt}", [3])
    if fmt == "xml" and lacking("XML files", since="4.0"):  # Spark 3.5 reads no XML
        with pytest.raises(JobFailedError, match=r"XML files: needs Spark 4\.0 or newer"):
            ws.run()
        return
    assert ws.run().inputs["src"]["files"] == 2
    write_batch(fmt, ws.landing / f"b3.{fmt}", [4, 5])
    assert ws.run().inputs["src"]["files"] == 1

    df = delta_engine(spark, mode="embedded").read(ws.target)
    column = "value" if fmt == "text" else "id"
    assert sorted(int(r[0]) for r in df.select(column).collect()) == [1, 2, 3, 4, 5]


@pytest.mark.compat
@pytest.mark.parametrize("reader", ["spark-avro", "fastavro"])
def test_avro_keeps_nested_and_logical_types_with_or_without_spark_avro(ws, spark, reader,
                                                                        monkeypatch):
    if reader == "fastavro":  # as on a session without Spark's Avro jar
        monkeypatch.setattr(files.reading, "_spark_avro_available", lambda spark: False)
    elif not files.reading._spark_avro_available(spark):
        unavailable("Spark's Avro jar is not on this session (bash .ci/setup.sh installs it)")
    ws.declare(format="avro", lineage="source_file")
    (ws.landing / "country=PT").mkdir()
    write_batch("avro", ws.landing / "country=PT" / "b1.avro", [1, 2])
    if reader == "fastavro" and lacking("Python data sources", since="4.0"):
        with pytest.raises(JobFailedError, match=r"without Spark's Avro jar .*: needs Spark "
                                                 r"4\.0 or newer"):
            ws.run()
        return
    ws.run()
    rows = delta_engine(spark, mode="embedded").read(ws.target).orderBy("id").collect()
    first = rows[0]
    assert (first.tags, first.address.city, first.status, first.amount) == (
        ["a", "1"], "Lisboa", "PAID", Decimal("12.50"))
    assert rows[1].address is None
    assert first.at.replace(tzinfo=None) == dt.datetime(2026, 1, 1)
    assert first.country == "PT"
    assert first.source_file == f"file:{ws.landing}/country=PT/b1.avro"


def test_xml_without_row_tag_is_a_clear_error(ws):
    from framework.errors import JobFailedError

    ws.declare(format="xml")
    write_batch("xml", ws.landing / "b1.xml", [1])
    with pytest.raises(JobFailedError, match="source src: format xml needs options"):
        ws.run()
