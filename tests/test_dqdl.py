"""Glue's DQDL rulesets: parsed with Glue's meaning (between excludes its bounds, NULLs fail
ColumnValues, numbers compare with string columns as numbers) and evaluated by
great-expectations; bad rulesets fail with a line naming the rule."""

from __future__ import annotations

import pytest

from framework.quality import RuleSet
from framework.quality.dqdl import DqdlError, parse_ruleset

ROWS = [(1, "a@x.com", 10.0, "new", "5"), (2, "b@x.com", 20.0, "paid", "12"),
        (2, None, -5.0, "lost", "x"), (4, "bad", 20000.0, "new", None),
        (None, "e@x.com", 30.0, "paid", "7")]
SCHEMA = "id BIGINT, email STRING, amount DOUBLE, status STRING, qty STRING"
TYPES = {"id": "bigint", "email": "string", "amount": "double", "status": "string",
         "qty": "string"}

# rule -> (outcome, rows failing it for a row-level rule, else the observed metric or None)
CASES = [
    ("RowCount = 5", "passed", 5),
    ("RowCount between 5 and 10", "failed", 5),  # bounds excluded
    ("RowCount > 4", "passed", 5),
    ("ColumnCount = 5", "passed", 5),
    ("ColumnCount < 5", "failed", 5),
    ('IsComplete "email"', "failed", 1),
    ('Completeness "email" >= 0.8', "passed", 0.8),
    ('Completeness "email" > 0.8', "failed", 0.8),
    ('IsUnique "id"', "failed", 2),
    ('IsPrimaryKey "id"', "failed", 3),
    ('Uniqueness "id" >= 0.4', "passed", None),  # 1 and 4 occur once, in 5 rows
    ('Uniqueness "id" > 0.4', "failed", None),
    ('ColumnValues "amount" between -5 and 20000', "failed", 2),
    ('ColumnValues "amount" >= -5', "passed", 0),
    ('ColumnValues "amount" not between 0 and 25', "failed", 2),
    ('ColumnValues "id" in [1, 2, 4]', "failed", 1),  # NULL fails
    ('ColumnValues "id" not in [2]', "failed", 2),  # NULL passes
    ('ColumnValues "status" = "new"', "failed", 3),
    ('ColumnValues "status" != "lost"', "failed", 1),
    ('ColumnValues "qty" > 4', "failed", 2),  # "x" and NULL are not numbers above 4
    ('ColumnValues "email" matches "^[^@ ]+@[^@ ]+$"', "failed", 2),
    ('ColumnValues "status" in ["new", "paid"] with threshold >= 0.8', "passed", None),
    ('ColumnValues "status" in ["new", "paid"] with threshold > 0.8', "failed", None),
    ('ColumnLength "email" >= 5', "failed", 2),
    ('(ColumnValues "amount" > 0) or (ColumnValues "status" = "lost")', "passed", 0),
    ('(IsComplete "email") and (ColumnValues "id" <= 2)', "failed", 3),
    ('Mean "amount" between 4000 and 5000', "passed", 4011.0),
    ('Sum "amount" = 20055', "passed", 20055.0),
    ('DistinctValuesCount "status" = 3', "passed", 3),
    ('CustomSql "select count(*) from primary where amount < 0" = 0', "failed", None),
    ('CustomSql "SELECT max(amount) FROM primary" > 100', "passed", None),
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
    assert ruleset.rules[0].row_check[2] == "`status` IS NOT NULL AND (`status` IN ('a', 'b\"c'))"
    assert ruleset.metrics == {"RowCount > 0": "Dataset.*.RowCount"}
    assert ruleset.analyzers


@pytest.mark.parametrize(("text", "message"), [
    ("ColumnCount > 0", "expected 'Rules', found 'ColumnCount'"),
    ("Rules = [ ]", "expected a rule, found ']'"),
    ("Rules = [ RowCount > 0", "expected ']', found 'the end'"),
    ('Rules = [ ReferentialIntegrity "a" "b.c" = 1.0 ]',
     'ReferentialIntegrity "a" "b.c" = 1.0: ReferentialIntegrity is not evaluated'),
    ('Rules = [ IsComplete "id" where "id > 1" ]', "where clauses are not evaluated"),
    ('Rules = [ ColumnValues "id" > (now() - 3 days) ]', "date expressions"),
    ('Rules = [ RowCount != 3 ]', "RowCount != 3: RowCount is compared with numbers by >"),
    ('Rules = [ ColumnValues "id" ]', 'ColumnValues "id": ColumnValues needs a comparison'),
    ('Rules = [ IsComplete "id" > 1 ]', "IsComplete takes no comparison"),
    ('Rules = [ (RowCount > 1) and (IsComplete "id") ]', "only row-level rules"),
    ('Rules = [ (IsComplete "id") and (IsComplete "a") or (IsComplete "b") ]',
     "mixes 'and' with 'or'"),
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
