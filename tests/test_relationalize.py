"""Relationalize: Glue's layout, deterministic keys, and rejoin as its exact inverse."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from framework.errors import TransformError
from framework.transforms import rejoin, relationalize

ORDER = T.StructType([
    T.StructField("order_id", T.StringType()),
    T.StructField("customer", T.StructType([
        T.StructField("name", T.StringType()),
        T.StructField("phones", T.ArrayType(T.StringType()))])),
    T.StructField("lines", T.ArrayType(T.StructType([
        T.StructField("sku", T.StringType()),
        T.StructField("qty", T.LongType()),
        T.StructField("taxes", T.ArrayType(T.DoubleType()))]))),
    T.StructField("tags", T.MapType(T.StringType(), T.LongType())),
])
ORDERS = [
    ("o1", ("ann", ["111", "222"]), [("a", 1, [0.1, 0.2]), ("b", 2, [])], {"x": 1}),
    ("o2", None, [], None),
    ("o3", ("cy", None), None, {}),
]


def collected(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.compat
def test_glue_layout_root_children_and_keys(spark):
    tables = relationalize(spark.createDataFrame(ORDERS, ORDER), "orders",
                           key_columns=["order_id"])
    assert list(tables) == ["orders", "orders_customer.phones", "orders_lines",
                            "orders_lines_taxes", "orders_tags"]
    assert tables["orders"].columns == ["order_id", "customer.name", "customer.phones",
                                        "lines", "tags"]
    assert tables["orders_lines"].columns == ["id", "index", "lines.val.sku", "lines.val.qty",
                                              "lines.val.taxes"]
    assert tables["orders_lines_taxes"].columns == ["id", "index", "lines.val.taxes.val"]
    assert tables["orders_customer.phones"].columns == ["id", "index", "customer.phones.val"]
    assert tables["orders_tags"].columns == ["id", "key", "tags.val"]

    root = {r.order_id: r for r in tables["orders"].collect()}
    o1, o2, o3 = root["o1"], root["o2"], root["o3"]
    assert o1["customer.name"] == "ann" and o2["customer.name"] is None  # NULL struct
    assert o2["lines"] is not None and o3["lines"] is None  # empty array vs NULL array
    lines = collected(tables["orders_lines"])
    assert [(r[0], r[1], r[2], r[3]) for r in lines] == sorted(
        [(o1["lines"], 0, "a", 1), (o1["lines"], 1, "b", 2)], key=repr)
    taxes = collected(tables["orders_lines_taxes"])
    first_line_taxes = next(r[4] for r in lines if r[1] == 0)
    assert taxes == [(first_line_taxes, 0, 0.1), (first_line_taxes, 1, 0.2)]
    assert collected(tables["orders_tags"]) == [(o1["tags"], "x", 1)]  # o3's map is empty


def test_keys_are_deterministic_across_runs(spark):
    df = spark.createDataFrame(ORDERS, ORDER)
    for keys in (["order_id"], []):
        first, second = relationalize(df, "o", key_columns=keys), relationalize(
            df.repartition(3), "o", key_columns=keys)
        for name in first:
            assert collected(first[name]) == collected(second[name]), name


def test_rejoin_restores_the_rows(spark):
    df = spark.createDataFrame(ORDERS, ORDER)
    back = rejoin(relationalize(df, "orders", key_columns=["order_id"]), "orders")
    assert back.schema.simpleString() == df.schema.simpleString()
    assert normalized(back) == normalized(df)


def test_names_that_need_escaping_round_trip(spark):
    schema = T.StructType([T.StructField("a.b", T.StructType([
        T.StructField("x%y", T.LongType()),
        T.StructField("list.of", T.ArrayType(T.LongType()))]))])
    df = spark.createDataFrame([((1, [1, 2]),)], schema)
    tables = relationalize(df, "t")
    assert list(tables) == ["t", "t_a.b.list.of"]  # a table's name as Glue's frame's
    assert tables["t"].columns == ["a%2Eb.x%25y", "a%2Eb.list%2Eof"]
    back = rejoin(tables, "t")
    assert back.schema.simpleString() == df.schema.simpleString()
    assert normalized(back) == normalized(df)


def test_bad_input_is_named(spark):
    df = spark.createDataFrame(ORDERS, ORDER)
    with pytest.raises(TransformError, match=r"orders: key column\(s\) \['nope'\]") as caught:
        relationalize(df, "orders", key_columns=["nope"])
    assert caught.value.table == "orders"
    clash = T.StructType([T.StructField("a_b", T.ArrayType(T.LongType())),
                          T.StructField("a", T.ArrayType(T.StructType([
                              T.StructField("b", T.ArrayType(T.LongType()))])))])
    with pytest.raises(TransformError, match="t_a_b: two tables would get this name"):
        relationalize(spark.createDataFrame([([1], [([2],)])], clash), "t")


# --- rejoin(relationalize(x)) == x on generated nested data --------------------------------

NAMES = st.sampled_from(["a", "b", "c", "n.d", "p%q"])
LEAVES = st.sampled_from([T.LongType(), T.StringType(), T.DoubleType(), T.BooleanType()])


def data_types(depth: int = 3) -> st.SearchStrategy[T.DataType]:
    if depth == 0:
        return LEAVES
    inner = data_types(depth - 1)
    return st.one_of(
        LEAVES,
        st.builds(T.ArrayType, inner),
        st.builds(lambda v: T.MapType(T.StringType(), v), inner),
        st.lists(st.tuples(NAMES, inner), min_size=1, max_size=3,
                 unique_by=lambda f: f[0]).map(
            lambda fields: T.StructType([T.StructField(n, t) for n, t in fields])))


def values(kind: T.DataType) -> st.SearchStrategy:
    if isinstance(kind, T.LongType):
        plain = st.integers(-5, 5)
    elif isinstance(kind, T.StringType):
        plain = st.text("xyz", max_size=2)
    elif isinstance(kind, T.DoubleType):
        plain = st.sampled_from([0.5, -1.25, 3.0])
    elif isinstance(kind, T.BooleanType):
        plain = st.booleans()
    elif isinstance(kind, T.ArrayType):
        plain = st.lists(values(kind.elementType), max_size=3)
    elif isinstance(kind, T.MapType):
        plain = st.dictionaries(st.text("kv", min_size=1, max_size=2), values(kind.valueType),
                                max_size=2)
    else:
        plain = st.tuples(*[values(f.dataType) for f in kind.fields])
    return st.one_of(st.none(), plain)


@st.composite
def nested_frames(draw):
    fields = draw(st.lists(st.tuples(NAMES, data_types()), min_size=1, max_size=3,
                           unique_by=lambda f: f[0]))
    schema = T.StructType([T.StructField(n, t) for n, t in fields])
    rows = draw(st.lists(st.tuples(*[values(t) for _, t in fields]), min_size=1, max_size=4))
    return schema, rows


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(frame=nested_frames())
def test_rejoin_inverts_relationalize_on_generated_data(spark, frame):
    schema, rows = frame
    df = spark.createDataFrame(rows, schema)
    back = rejoin(relationalize(df, "t"), "t")
    assert back.schema.simpleString() == df.schema.simpleString()
    assert normalized(back) == normalized(df)


def normalized(df) -> list[str]:
    """Rows as sorted JSON; a struct whose fields are all NULL counts as NULL (documented)."""
    def norm(value):
        if isinstance(value, T.Row):
            fields = {k: norm(v) for k, v in value.asDict().items()}
            return None if all(v is None for v in fields.values()) else fields
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        return value

    return sorted(json.dumps([norm(v) for v in row], sort_keys=True) for row in df.collect())
