"""Glue's DQDL rulesets: parsed with Glue's meaning (between excludes its bounds, NULLs fail
ColumnValues, numbers compare with string columns as numbers) and evaluated by
great-expectations; bad rulesets fail with a line naming the rule."""

from __future__ import annotations

import math
import statistics

import pytest

from framework.quality import RuleSet
from framework.quality.dqdl import DqdlError, parse_ruleset

ROWS = [(1, "a@x.com", 10.0, "new", "5"), (2, "b@x.com", 20.0, "paid", "12"),
        (2, None, -5.0, "lost", "x"), (4, "bad", 20000.0, "new", None),
        (None, "e@x.com", 30.0, "paid", "7")]
SCHEMA = "id BIGINT, email STRING, amount DOUBLE, status STRING, qty STRING"
TYPES = {"id": "bigint", "email": "string", "amount": "double", "status": "string",
         "qty": "string"}

AMOUNTS = [10.0, 20.0, -5.0, 20000.0, 30.0]

# rule -> (outcome, rows failing it for a row-level rule, else the observed metric or None)
CASES = [
    ("RowCount = 5", "passed", 5),
    ("RowCount between 5 and 10", "failed", 5),  # bounds excluded
    ("RowCount > 4", "passed", 5),
    ("RowCount != 4", "passed", 5),
    ("RowCount = 2 where \"status = 'new'\"", "passed", 2),
    ("RowCount > avg(last(3))", "passed", 5),  # no history: last(3) is 0.0
    ("RowCount between (0.9 * avg(last(3))) and (1.1 * avg(last(3)))", "failed", 5),
    ("ColumnCount = 5", "passed", 5),
    ("ColumnCount < 5", "failed", 5),
    ('ColumnNamesMatchPattern "[a-z]+"', "passed", 1.0),
    ('IsComplete "email"', "failed", 1),
    ('IsComplete "email" where "id = 1"', "passed", 0),  # rows left out pass
    ('Completeness "email" >= 0.8', "passed", 0.8),
    ('Completeness "email" > 0.8', "failed", 0.8),
    ('Completeness "email" = 1.0 where "amount < 100"', "failed", 0.75),
    ('IsUnique "id"', "failed", 2),
    ('IsPrimaryKey "id"', "failed", 3),
    ('IsPrimaryKey "id" "status"', "failed", 1),
    ('Uniqueness "id" = 0.5', "passed", 0.5),  # 1 and 4 occur once, in 4 rows not NULL
    ('Uniqueness "id" > 0.5', "failed", 0.5),
    ('UniqueValueRatio "id" between 0.6 and 0.7', "passed", 2 / 3),  # 2 of 1, 2, 4
    ('ColumnValues "amount" between -5 and 20000', "failed", 2),
    ('ColumnValues "amount" >= -5', "passed", 0),
    ('ColumnValues "amount" not between 0 and 25', "failed", 2),
    ('ColumnValues "id" in [1, 2, 4]', "failed", 1),  # NULL fails
    ('ColumnValues "id" in [1, 2, 4, NULL]', "passed", 0),
    ('ColumnValues "id" not in [2]', "failed", 2),  # NULL passes
    ('ColumnValues "status" = "new"', "failed", 3),
    ('ColumnValues "status" != "lost"', "failed", 1),
    ('ColumnValues "qty" > 4', "failed", 2),  # "x" and NULL are not numbers above 4
    ('ColumnValues "email" matches "[^@ ]+@[^@ ]+"', "failed", 2),
    ('ColumnValues "email" matches "[a-z]@x"', "failed", 5),  # the whole value must match
    ('ColumnValues "email" not matches "[a-z]@x.com"', "failed", 4),
    ('ColumnValues "status" in ["new", "paid"] with threshold >= 0.8', "passed", None),
    ('ColumnValues "status" in ["new", "paid"] with threshold > 0.8', "failed", None),
    ("ColumnValues \"amount\" < 100 where \"status = 'paid'\"", "passed", 0),
    ('ColumnLength "email" >= 5', "failed", 2),
    ('ColumnLength "email" < 5', "failed", 3),  # a NULL is of length 0
    ('ColumnDataType "qty" = "INTEGER"', "failed", 2),
    ('ColumnDataType "qty" = "INTEGER" with threshold >= 0.6', "passed", None),
    ('(ColumnValues "amount" > 0) or (ColumnValues "status" = "lost")', "failed", 0),
    ('(IsComplete "email") and (ColumnValues "id" <= 2)', "failed", 3),
    ('(RowCount > 1) and (IsComplete "id")', "failed", None),
    ('(ColumnExists "qty") and ((IsComplete "qty") or (RowCount > 1))', "passed", None),
    ('Mean "amount" between 4000 and 5000', "passed", 4011.0),
    ("Mean \"amount\" = 25 where \"status = 'paid'\"", "passed", 25.0),
    ('Sum "amount" = 20055', "passed", 20055.0),
    ('StandardDeviation "amount" > 7000', "passed", statistics.pstdev(AMOUNTS)),
    ('Entropy "status" between 1.05 and 1.06', "passed",
     -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))),
    ('ColumnCorrelation "id" "amount" > 0.5', "passed",
     statistics.correlation([1, 2, 2, 4], AMOUNTS[:4])),
    ('DistinctValuesCount "status" = 3', "passed", 3),
    ('DistinctValuesCount "email" = 5', "passed", 5),  # NULL counts as a value
    ('CustomSql "select count(*) from primary where amount < 0" = 0', "failed", 1),
    ('CustomSql "SELECT max(amount) FROM primary" > 100', "passed", 20000.0),
    ('CustomSql "select id, amount from primary where amount > 0"', "failed", 1),
    ('ColumnExists "qty"', "passed", None),
    ('ColumnExists "nope"', "failed", None),
    ('IsComplete "nope"', "error", None),  # Glue fails the rule and goes on
]


@pytest.fixture(scope="module")
def evaluated(spark):
    from framework.quality import gate

    df = spark.createDataFrame(ROWS, SCHEMA).cache()
    ruleset = parse_ruleset("Rules = [\n" + ",\n".join(r for r, _, _ in CASES) + "\n]", TYPES)
    outcomes = gate.evaluate(df, RuleSet("dqdl", "warn", ruleset.rules))
    row_level = [o.rule for o in outcomes if o.rule.row_level and o.outcome != "error"]
    broken = [r[gate.BROKEN_RULES_COLUMN] for r in gate.mark(df, row_level).collect()]
    return outcomes, broken


@pytest.mark.parametrize(("rule", "outcome", "measure"), CASES, ids=[r for r, _, _ in CASES])
def test_each_rule_keeps_its_dqdl_meaning(evaluated, rule, outcome, measure):
    outcomes, broken = evaluated
    found = outcomes[[r for r, _, _ in CASES].index(rule)]
    assert found.rule.text == rule
    assert found.outcome == outcome, found
    if outcome == "error":
        assert "nope" in found.message
    elif found.rule.row_level:
        assert (found.unexpected_count or 0) == measure
        assert sum(rule in rules for rules in broken) == measure  # the rows marked
    elif measure is not None:
        assert found.observed == pytest.approx(measure)


#: one rule of each query shape: a row test, a scalar, rows sharing a key, CustomSql's rows
#: and its number, a composite, a bad column
QUERY_SHAPES = ['ColumnValues "amount" not between 0 and 25',
                'Entropy "status" between 1.05 and 1.06',
                "RowCount = 2 where \"status = 'new'\"", 'IsPrimaryKey "id" "status"',
                'CustomSql "select id, amount from primary where amount > 0"',
                'CustomSql "select count(*) from primary where amount < 0" = 0',
                '(IsComplete "email") and (ColumnValues "id" <= 2)', 'IsComplete "nope"']


def test_the_rows_counted_in_one_pass_are_the_ones_great_expectations_counts(
        spark, evaluated, monkeypatch):
    """The gate counts each query rule's rows in its pass or in one query of them all, and
    a scalar rule's value (Entropy, CustomSql's number) in one query of them all; GX
    running each row query alone, and each scalar query run alone, find the same."""
    from framework.quality import gate

    outcomes, _ = evaluated
    texts = [r for r, _, _ in CASES]
    df = spark.createDataFrame(ROWS, SCHEMA)
    rules = parse_ruleset("Rules = [\n" + ",\n".join(QUERY_SHAPES) + "\n]", TYPES).rules
    df.createOrReplaceTempView("alone")

    def each_alone(_df, found, _expectations, _measured):
        """Each scalar rule's query, a Spark query of its own; no rows counted for GX."""
        scalars = [r for rule in found for r in (*rule.parts, rule) if r.metric_query]
        return {r.text: gate._number(spark.sql(r.metric_query.format(batch="alone"))
                                     .collect()[0][0]) for r in scalars}, ()

    monkeypatch.setattr(gate, "_queried", each_alone)
    by_gx_alone = gate.evaluate(df, RuleSet("dqdl", "warn", rules),
                                measured=gate.Measured(rows=len(ROWS)))
    assert repr(by_gx_alone) == repr([outcomes[texts.index(rule)] for rule in QUERY_SHAPES])
    assert [o.observed for o in by_gx_alone[1:2]] == [pytest.approx(1.0549, abs=1e-3)]


def test_comments_spacing_and_an_analyzers_section_are_read():
    ruleset = parse_ruleset('''
        # Example rules: Completeness "colA" between 0.4 and 0.8, ColumnCount > 10
        Rules = [
            ColumnValues   "status" in ["a", "b\\"c"],   # trailing comment
            RowCount > 0
        ],
        Analyzers = [ RowCount, Completeness "status" ]
    ''', TYPES)
    assert [r.text for r in ruleset.rules] == ['ColumnValues "status" in ["a", "b\\"c"]',
                                               "RowCount > 0"]
    assert ruleset.rules[0].row_check[2] == (
        "`status` IS NOT NULL AND ((`status` IN ('a', 'b\"c')))")
    assert ruleset.metrics == {
        'ColumnValues "status" in ["a", "b\\"c"]': "Column.status.ColumnValues.Compliance",
        "RowCount > 0": "Dataset.*.RowCount"}
    assert ruleset.analyzers


@pytest.mark.parametrize(("text", "message"), [
    ("ColumnCount > 0", "expected 'Rules', found 'ColumnCount'"),
    ("Rules = [ ]", "expected a rule, found ']'"),
    ("Rules = [ RowCount > 0", "expected ']', found 'the end'"),
    ('Rules = [ ReferentialIntegrity "a" "b.c" = 1.0 ]',
     "no reference data named 'b' (give it in additional_data_sources; given: none)"),
    ('Rules = [ ColumnCount > 1 where "id > 1" ]', "ColumnCount takes no where clause"),
    ('Rules = [ ColumnLength "email" > 1 with threshold > 0.5 ]',
     "ColumnLength takes no 'with threshold'"),
    ('Rules = [ RowCount > "x" ]', 'RowCount > "x": RowCount is compared with numbers'),
    ("Rules = [ RowCount > last(3) ]", "RowCount is compared with numbers"),
    ('Rules = [ ColumnValues "id" ]', 'ColumnValues "id": ColumnValues needs a comparison'),
    ('Rules = [ IsComplete "id" > 1 ]', "IsComplete takes no comparison"),
    ('Rules = [ DetectAnomalies "RowCount" ]',
     "DetectAnomalies is not evaluated by deltamark: Glue's anomaly detection is AWS's own"),
    ('Rules = [ FileFreshness "s3://b/p/" > (now() - 24 hours) ]',
     "FileFreshness is not evaluated by deltamark: it checks S3 objects"),
    ('Rules = [ Completness "id" > 0.5 ]', "Completness is not a DQDL rule type"),
    ('Rules = [ ColumnValues "id" in $nope ]', "$nope: no such constant"),
    ('Rules = [ DataFreshness "id" <= 24 ]', "DataFreshness compares with a duration"),
    ('Rules = [ IsComplete "id", IsComplete "id" ]', 'IsComplete "id": listed twice'),
    ('Rules = [ CustomSql "select 1" > 0 ]', "the query must read the table 'primary'"),
    ('Rules = [ IsComplete "id" ] extra', "after the rules: unexpected 'extra'"),
    ("Rules = [ RowCount > 0 ] ?", "cannot read '?'"),
])
def test_bad_rulesets_name_the_rule_and_the_problem(text, message):
    with pytest.raises(DqdlError) as raised:
        parse_ruleset(text, TYPES)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def _outcomes(spark, df, text, references=None):
    from framework.quality import gate

    ruleset = parse_ruleset(text, {f.name: f.dataType.simpleString() for f in df.schema.fields},
                            references=references)
    found = gate.evaluate(df, RuleSet("dqdl", "warn", ruleset.rules))
    return {o.rule.text: (o.outcome, o.unexpected_count if o.rule.row_level else o.observed)
            for o in found}


def test_a_ruleset_glue_recommended_gets_the_results_glue_recorded(spark):
    """aws-sdk-pandas' Glue Data Quality tutorial: a ruleset Glue recommended for a
    three-row table, and the outcomes Glue recorded for it (all pass but Uniqueness of
    c2, whose values are all 0)."""
    df = spark.createDataFrame([(0, 0, 0), (1, 1, 0), (2, 2, 0)], "c0 INT, c1 INT, c2 INT")
    found = _outcomes(spark, df, """Rules = [RowCount between 1 and 6, IsComplete "c0",
        Uniqueness "c0" > 0.95, ColumnValues "c0" <= 2, IsComplete "c1",
        Uniqueness "c1" > 0.95, ColumnValues "c1" <= 2, IsComplete "c2",
        ColumnValues "c2" in [0, 1, 2], Uniqueness "c2" > 0.95]""")
    assert [rule for rule, (outcome, _) in found.items() if outcome != "passed"] == [
        'Uniqueness "c2" > 0.95']
    assert found['Uniqueness "c2" > 0.95'][1] == 0.0  # Glue: "Value: 0.0 does not meet..."


def test_rulesets_published_with_their_data_shapes(spark):
    """Rulesets from aws-insurancelake-etl (dates as text checked by ColumnDataType, full
    regular expressions, composites with ColumnExists, both CustomSql forms) and
    anand086/aws-glue-data-quality (leading commas), on rows shaped like theirs."""
    policies = spark.createDataFrame([
        ("P1", "1/2/24", "24-01-02", "2024-01-02", "2025-01-02", "2024-01-01 10:00:00",
         100.0, 200.0, "New"),
        ("P2", "12/31/23", "23-12-31", "2024-02-30", "2023-01-01", "yesterday", 50.0, None,
         "Renewal"),
        (None, "2024-01-01", "24-1-1", None, "2024-03-01", "2024-01-01T00:00:00", -1.0, -5.0,
         "Lapsed")],
        "PolicyNumber STRING, StartDate STRING, EndDate STRING, EffectiveDate STRING, "
        "ExpirationDate STRING, GenerationDate STRING, WrittenPremiumAmount DOUBLE, "
        "EarnedPremium DOUBLE, NewOrRenewal STRING")
    found = _outcomes(spark, policies, r'''Rules = [
        ColumnValues "StartDate" matches "\d{1,2}/\d{1,2}/\d\d",
        ColumnValues "EndDate" matches "\d\d-\d{1,2}-\d{1,2}",
        ColumnDataType "EffectiveDate" = "DATE", ColumnDataType "GenerationDate" = "TIMESTAMP",
        Completeness "EarnedPremium" > 0.80, ColumnValues "WrittenPremiumAmount" >= 0,
        ColumnValues "NewOrRenewal" in [ "New", "Renewal" ],
        (ColumnExists "PolicyNumber") and (IsComplete "PolicyNumber"),
        CustomSql "SELECT COUNT(*) FROM primary WHERE EffectiveDate > ExpirationDate" = 0,
        CustomSql "ROW_SQL"
    ]'''.replace("ROW_SQL", "SELECT PolicyNumber FROM primary WHERE WrittenPremiumAmount <= "
                               "EarnedPremium OR EarnedPremium is null"))
    assert found == {
        r'ColumnValues "StartDate" matches "\d{1,2}/\d{1,2}/\d\d"': ("failed", 1),
        r'ColumnValues "EndDate" matches "\d\d-\d{1,2}-\d{1,2}"': ("passed", 0),
        'ColumnDataType "EffectiveDate" = "DATE"': ("failed", 2),  # Feb 30th, NULL
        'ColumnDataType "GenerationDate" = "TIMESTAMP"': ("failed", 1),
        'Completeness "EarnedPremium" > 0.80': ("failed", pytest.approx(2 / 3)),
        'ColumnValues "WrittenPremiumAmount" >= 0': ("failed", 1),
        'ColumnValues "NewOrRenewal" in [ "New", "Renewal" ]': ("failed", 1),
        '(ColumnExists "PolicyNumber") and (IsComplete "PolicyNumber")': ("failed", None),
        'CustomSql "SELECT COUNT(*) FROM primary WHERE EffectiveDate > ExpirationDate" = 0':
            ("failed", 1),
        'CustomSql "SELECT PolicyNumber FROM primary WHERE WrittenPremiumAmount <= '
        'EarnedPremium OR EarnedPremium is null"': ("failed", 1)}
    reviews = spark.createDataFrame([("US", 1, 5, "2015-08-31"), ("UK", 2, 4, None)],
                                    "marketplace STRING, customer_id INT, star_rating INT, "
                                    "review_date STRING")
    found = _outcomes(spark, reviews, """Rules = [
          ColumnExists "marketplace"
          , IsComplete "customer_id"
          , ColumnValues "star_rating" in [ 1, 2, 3, 4, 5 ]
          , DistinctValuesCount "marketplace" >= 5
          , Completeness "review_date" > 0.95
    ]""")
    assert [rule for rule, (outcome, _) in found.items() if outcome == "failed"] == [
        'DistinctValuesCount "marketplace" >= 5', 'Completeness "review_date" > 0.95']


def test_rules_on_reference_data_and_on_time(spark):
    from datetime import datetime, timedelta

    now = datetime.now()
    orders = spark.createDataFrame([
        (1, "c0", 10.0, now - timedelta(hours=1), "2024-05-01"),
        (2, "c1", 20.0, now - timedelta(hours=30), "2024-06-30"),
        (3, None, 5.0, None, None)],
        "id BIGINT, customer STRING, amount DOUBLE, updated TIMESTAMP, day STRING")
    reference = spark.createDataFrame([(1, "c0", 10.0), (2, "c1", 21.0), (3, None, 5.0)],
                                      "id BIGINT, customer STRING, amount DOUBLE")
    reference.createOrReplaceTempView("reference")
    try:
        found = _outcomes(spark, orders, """Rules = [
            DatasetMatch "reference" "id" "customer,amount" >= 0.6,
            DatasetMatch "reference" "id->id" "amount->amount" = 1.0,
            ReferentialIntegrity "customer,amount" "reference.{customer,amount}" > 0.3,
            DataFreshness "updated" <= 24 hours,
            DataFreshness "updated" <= 2 days where "id < 3",
            ColumnValues "updated" > (now() - 2 days),
            ColumnValues "day" between "2024-01-01" and "2024-06-30"
        ]""", references={"reference": {"id": "bigint", "customer": "string",
                                        "amount": "double"}})
    finally:
        spark.catalog.dropTempView("reference")
    assert found == {
        'DatasetMatch "reference" "id" "customer,amount" >= 0.6': ("passed",
                                                                  pytest.approx(2 / 3)),
        'DatasetMatch "reference" "id->id" "amount->amount" = 1.0': ("failed",
                                                                    pytest.approx(2 / 3)),
        # (c0, 10.0) is there; (c1, 20.0) is not; NULL never matches
        'ReferentialIntegrity "customer,amount" "reference.{customer,amount}" > 0.3': (
            "passed", pytest.approx(1 / 3)),
        'DataFreshness "updated" <= 24 hours': ("failed", pytest.approx(1 / 3)),
        'DataFreshness "updated" <= 2 days where "id < 3"': ("passed", 1.0),
        'ColumnValues "updated" > (now() - 2 days)': ("failed", 1),  # NULL fails
        'ColumnValues "day" between "2024-01-01" and "2024-06-30"': ("failed", 2)}
