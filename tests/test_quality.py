"""Data-quality gates: every rule kind through great-expectations, the three policies on
real job runs (target, quarantine and bookmark checked), results in the state and CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from databases import unavailable
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine, native_available
from framework.errors import ConfigError, DataQualityError, JobError, JobFailedError
from framework.ops import actions
from framework.quality import parse_checks
from framework.run.spec import load_job

ROWS = [(1, "a@x.com", 10.0, "new", "DE"), (2, "b@x.com", 20.0, "paid", "FR"),
        (2, None, -5.0, "lost", "DEU"), (4, "bad", 20000.0, "new", None),
        (None, "e@x.com", 30.0, "paid", "IT")]
SCHEMA = "order_id BIGINT, email STRING, amount DOUBLE, status STRING, country STRING"
ALL_COLUMNS = {"order_id": "bigint", "email": "string", "amount": "double",
               "status": "string", "country": "string"}

# rule -> (outcome, failing rows or observed value) on ROWS
CASES = [
    ({"IsComplete": "email"}, "failed", 1),
    ({"IsComplete": "status"}, "passed", 0),
    ({"Completeness": {"column": "email", "at_least": 0.8}}, "passed", 0.8),
    ({"Completeness": {"column": "email", "at_least": 0.9}}, "failed", 0.8),
    ({"IsUnique": "order_id"}, "failed", 2),
    ({"IsUnique": "country"}, "passed", 0),
    ({"Uniqueness": {"column": "order_id", "at_least": 0.7}}, "passed", 0.75),
    ({"Uniqueness": {"column": "order_id", "at_least": 0.9}}, "failed", 0.75),
    ({"IsPrimaryKey": "order_id"}, "failed", 3),
    ({"IsPrimaryKey": ["order_id", "status"]}, "failed", 1),
    ({"IsPrimaryKey": ["status", "amount"]}, "passed", 0),
    ({"ColumnValues": {"column": "amount", "between": [0, 10000]}}, "failed", 2),
    ({"ColumnValues": {"column": "amount", "at_least": 0}}, "failed", 1),
    ({"ColumnValues": {"column": "amount", "between": [-10, 30000]}}, "passed", 0),
    ({"ColumnValues": {"column": "status", "in": ["new", "paid"]}}, "failed", 1),
    ({"ColumnValues": {"column": "status", "in": ["new", "paid", "lost"]}}, "passed", 0),
    ({"ColumnValues": {"column": "email", "matches": r"^\S+@\S+$"}}, "failed", 1),
    ({"ColumnValues": {"column": "email", "matches": r"^\p{L}+@\p{L}+\.\p{L}+$"}}, "failed", 1),
    ({"ColumnLength": {"column": "country", "between": [2, 2]}}, "failed", 1),
    ({"ColumnLength": {"column": "country", "between": [2, 3]}}, "passed", 0),
    ({"ColumnExists": "amount"}, "passed", None),
    ({"ColumnExists": "discount"}, "failed", None),
    ({"RowCount": {"between": [1, 10]}}, "passed", 5),
    ({"RowCount": {"at_least": 6}}, "failed", 5),
    ({"SchemaMatch": {"columns": ALL_COLUMNS}}, "passed", None),
    ({"SchemaMatch": {"columns": {**ALL_COLUMNS, "amount": "bigint"}}}, "failed", None),
    ({"SchemaMatch": {"columns": {"amount": "double"}, "exact": False}}, "passed", None),
    ({"CustomSql": {"sql": "SELECT * FROM primary WHERE amount < 0"}}, "failed", 1),
    ({"CustomSql": {"sql": "SELECT COUNT(*) FROM primary", "between": [1, 10]}}, "passed", 0),
    ({"expect_column_max_to_be_between": {"column": "amount", "max_value": 100}},
     "failed", 20000.0),
    ({"ExpectColumnDistinctValuesToBeInSet": {"column": "status",
                                             "value_set": ["new", "paid", "lost"]}},
     "passed", None),
    ({"IsComplete": "no_such_column"}, "error", None),
]


@pytest.fixture(scope="module")
def evaluated(spark):
    from framework.quality import gate

    df = spark.createDataFrame(ROWS, SCHEMA).cache()
    sets, problems = parse_checks({"all": {"rules": [rule for rule, _, _ in CASES]}})
    assert problems == []
    outcomes = gate.evaluate(df, sets["all"])
    marked = gate.mark(df, [r for r in sets["all"].rules if "no_such_column" not in r.text])
    broken = [r[gate.BROKEN_RULES_COLUMN] for r in marked.collect()]
    return outcomes, broken




@pytest.mark.parametrize(("rule", "outcome", "measure"), CASES,
                         ids=[next(iter(rule)) + f"-{i}" for i, (rule, _, _) in enumerate(CASES)])
def test_each_rule_kind_is_evaluated_by_great_expectations(evaluated, rule, outcome, measure):
    outcomes, _ = evaluated
    found = outcomes[CASES.index((rule, outcome, measure))]
    assert found.outcome == outcome, found
    if outcome == "error":
        assert "no_such_column" in found.message
    elif found.rule.row_level:
        assert (found.unexpected_count or 0) == measure
    elif measure is not None:
        observed = found.observed if not isinstance(found.observed, list) else found.observed[0]
        assert observed == pytest.approx(measure)


def test_rows_marked_for_quarantine_match_the_counts_great_expectations_reports(evaluated):
    outcomes, broken = evaluated
    for found in outcomes:
        if found.rule.row_level and found.outcome != "error":
            marked = sum(found.rule.text in rules for rules in broken)
            assert marked == (found.unexpected_count or 0), found.rule.text
    # a failing value sample comes with failing row-level rules
    values = next(o for o in outcomes if o.rule.text.startswith('ColumnValues "amount" between'))
    assert sorted(values.sample) == [-5.0, 20000.0]


JAVA_TAKES = [r"^\p{L}+$", r"[\p{L}\s'-]+", r"\p{Lu}\pL", r"\Qa.b\E+", r"\Qa\\b\E",
              r"(?<year>\d{4})-\k<year>", r"\h+\R", r"a\\p", r"\x{1F600}", r"a*+(?>b)",
              r"\Qunterminated", r"^\d{5}-\d{4}$", r"id-(?i)abc", r"(?U)\w+", r"(a)\1",
              r"[{}]", r"\N{LATIN SMALL LETTER A}"]
JAVA_REFUSES = [r"(?P<n>a)", r"(?P=n)", r"(?#note)x", r"[a-", r"(abc", r"a{2,1}", r"\i",
                r"\d{,3}", r"a{b"]


@pytest.mark.parametrize("pattern", JAVA_TAKES + JAVA_REFUSES)
def test_a_regex_is_checked_at_load_as_java_reads_it(spark, pattern):
    # rlike and GX run Java's regexes: Python's syntax is not theirs
    from pyspark.errors import IllegalArgumentException

    try:
        spark._jvm.java.util.regex.Pattern.compile(pattern)
        java_takes = True
    except IllegalArgumentException:  # PatternSyntaxException, as PySpark raises it
        java_takes = False
    assert java_takes == (pattern in JAVA_TAKES)  # the lists say what Java does
    _, problems = parse_checks({"r": {"rules": [
        {"ColumnValues": {"column": "c", "matches": pattern}}]}})
    assert (problems == []) == java_takes, problems


def test_a_regex_java_refuses_at_run_time_is_a_rule_error_in_one_line(spark):
    from framework.quality import gate

    sets, problems = parse_checks({"r": {"rules": [  # Python reads (?a); Java does not
        {"ColumnValues": {"column": "email", "matches": "(?a)x"}}, {"IsComplete": "email"}]}})
    assert problems == []
    regex, complete = gate.evaluate(spark.createDataFrame(ROWS, SCHEMA), sets["r"])
    assert regex.outcome == "error"
    assert regex.message == "PatternSyntaxException: Unknown inline modifier near index 2"
    assert complete.outcome == "failed" and complete.unexpected_count == 1


HOSTILE_ROWS = [  # NULLs, NaN, infinities, empty and non-ASCII strings, repeated keys
    (1, "a@x.com", 10.0, "new", "DE"), (1, "a@x.com", float("nan"), "new", "ÄÖ"),
    (None, None, None, None, None), (None, "", -0.0, "", ""),
    (2, "b @x", float("inf"), "paid", "🇵🇹"), (3, "c@x.com", 10000.0, None, "FR"),
    (3, None, -1.0, "paid", None), (None, None, None, "new", "PT"),
    (4, "d@x.com", 0.0, "shipped", "DEU")]
HOSTILE_RULES = [
    {"IsComplete": "id"}, {"IsComplete": "email"}, {"IsUnique": "id"}, {"IsUnique": "status"},
    {"IsPrimaryKey": "id"}, {"IsPrimaryKey": ["id", "status"]},
    {"IsPrimaryKey": ["email", "country"]},
    {"Completeness": {"column": "email", "at_least": 0.5}},
    {"Uniqueness": {"column": "status", "at_least": 0.5}},
    {"ColumnValues": {"column": "amount", "between": [0, 10000]}},
    {"ColumnValues": {"column": "amount", "at_most": 10}},
    {"ColumnValues": {"column": "id", "at_least": 2}},
    {"ColumnValues": {"column": "status", "in": ["new", "paid", ""]}},
    {"ColumnValues": {"column": "email", "matches": r"^[^@ ]+@[^@ ]+$"}},
    {"ColumnValues": {"column": "country", "between": [1, 2]}},  # a string column: GX's own
    {"ColumnLength": {"column": "country", "between": [2, 2]}},
    {"ColumnLength": {"column": "email", "at_least": 1}},
    {"RowCount": {"at_least": 1}}, {"IsComplete": "missing"}, {"IsUnique": "missing"},
]


@pytest.mark.compat
def test_one_pass_counts_are_the_ones_great_expectations_measures(spark, monkeypatch):
    """The gate's one pass answers GX's metrics; GX alone gives the same results."""
    from framework.quality import gate

    df = spark.createDataFrame(
        HOSTILE_ROWS, "id BIGINT, email STRING, amount DOUBLE, status STRING, country STRING")
    sets, problems = parse_checks({"h": {"rules": HOSTILE_RULES}})
    assert problems == []
    measured = gate.measure(df, sets["h"].rules)
    assert measured.rows == len(HOSTILE_ROWS)
    answered = []
    answer = gate.Measured.answer
    monkeypatch.setattr(gate.Measured, "answer", lambda self, *a: (
        found := answer(self, *a), found[0] and answered.append(a[0]))[0])
    with_pass = gate.evaluate(df, sets["h"], measured=measured)
    assert len(answered) >= 20 and "column_values.unique.unexpected_count" in answered
    assert "compound_columns.unique.unexpected_count" in answered
    by_gx_alone = gate.evaluate(df, sets["h"], measured=gate.Measured(rows=measured.rows))
    assert repr(with_pass) == repr(by_gx_alone)  # repr: NaN samples compare unequal
    assert [o.outcome for o in with_pass].count("failed") >= 10  # the data breaks most rules
    outcomes = {o.rule.text: o.outcome for o in with_pass}
    assert outcomes['ColumnValues "country" between 1 and 2'] == "error"
    assert [o.outcome for o in with_pass][-2:] == ["error", "error"]


DENSE = [*range(-1000, 1000, 3), None]  # across the 64-value words' edges, 0 among them
TOP = {"BIGINT": 2**63, "INT": 2**31}


@pytest.mark.parametrize(("values", "dense"), [
    (DENSE, True), ([*DENSE, 63, 64], True), ([*DENSE, -64], True),  # 63 or -64 twice
    (lambda top: [*range(top - 300, top), None, None], True),
    (lambda top: [*range(-top, 300 - top), -top], True),
    ([0, -1, 1, 2**30, -2**30, None], False), ([0, 7, 7, 2**30], False),
], ids=["distinct", "a value twice", "a negative twice", "the type's top",
        "the type's bottom, twice", "sparse", "sparse, twice"])
@pytest.mark.parametrize("kind", ["BIGINT", "INT"])
def test_an_integer_key_s_uniqueness_is_measured_as_great_expectations_measures_it(
        spark, values, dense, kind):
    """A key of one integer column dense enough is counted from a word of bits per 64
    values, a sparse one (where a word would stand for one row) in the window; GX alone
    agrees."""
    from framework.quality import gate, measure

    values = values(TOP[kind]) if callable(values) else values
    df = spark.createDataFrame([(v,) for v in values], f"id {kind}")
    present = [v for v in values if v is not None]
    ranges = {"id": (min(present), max(present), len(present))}
    assert measure._distinct_integers(df, ranges) == (
        {"id": (len(set(present)), len(present))} if dense else {})
    sets, _ = parse_checks({"u": {"rules": [{"IsUnique": "id"}, {"IsPrimaryKey": "id"}]}})
    measured = gate.measure(df, sets["u"].rules)
    [unique] = [a for a in measured.answers
                if a.metric == "column_values.unique.unexpected_count"]
    assert unique.value == (0 if len(set(present)) == len(present) else 2)
    with_pass = gate.evaluate(df, sets["u"], measured=measured)
    by_gx_alone = gate.evaluate(df, sets["u"], measured=gate.Measured(rows=measured.rows))
    assert repr(with_pass) == repr(by_gx_alone)


def test_schema_match_checks_decimal_precision_and_scale(spark):
    from decimal import Decimal

    from framework.quality import gate

    df = spark.createDataFrame([(1, Decimal("1.5"))], "id BIGINT, amount DECIMAL(12,4)")
    declared = ["decimal(12, 4)", "DECIMAL(12,4)", "decimal(10,2)", "decimal(12)", "decimal"]
    sets, problems = parse_checks({"d": {"rules": [
        {"SchemaMatch": {"columns": {"id": "bigint", "amount": t}}} for t in declared]}})
    assert problems == []
    outcomes = gate.evaluate(df, sets["d"])
    assert [o.outcome for o in outcomes] == ["passed", "passed", "failed", "failed", "passed"]
    assert outcomes[2].observed == {"amount": "decimal(12,4)"}
    assert "observed {'amount': 'decimal(12,4)'}" in outcomes[2].summary()

    _, problems = parse_checks({"d": {"rules": [
        {"SchemaMatch": {"columns": {"amount": "decimal(40,2)"}}},
        {"SchemaMatch": {"columns": {"amount": "decimal(2,5)"}}},
        {"SchemaMatch": {"columns": {"amount": "decimal(x)"}}}]}})
    assert len(problems) == 3
    assert all("write decimal(precision, scale), precision 1-38" in p for p in problems)


def test_rule_sets_are_validated_all_at_once_naming_each_key(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bad.yaml").write_text(json.dumps({
        "class": "jobs.orders_ingest:OrdersIngest",
        "checks": {
            "orders": {"policy": "quarantine", "rules": [
                {"IsComplete": "id"}, {"Completeness": {"column": "id", "at_least": 2}},
                {"ColumnValues": {"column": "email", "matches": "(["}},
                {"RowCount": {"between": [10, 1]}}, {"NoSuchKind": "x"},
                {"ColumnValues": {"column": "country", "between": ["A", "Z"]}},
                {"ColumnValues": {"column": "day", "between": ["2024-01-01", "2024-12-31"]}}]},
            "other": {"policy": "explode", "rules": []}}}))
    with pytest.raises(ConfigError) as exc:
        load_job(_settings(tmp_path), "bad")
    problems = exc.value.problems
    assert exc.value.path.endswith("bad.yaml")
    assert any(p.startswith("checks.orders.quarantine:") for p in problems)
    assert any(p.startswith("checks.orders.rules[1]: Completeness") for p in problems)
    assert any(p.startswith("checks.orders.rules[2]: ColumnValues: matches") for p in problems)
    assert any(p.startswith("checks.orders.rules[3]: RowCount: the low bound") for p in problems)
    assert any(p.startswith("checks.orders.rules[4]: unknown rule 'NoSuchKind'") for p in problems)
    assert any(p.startswith("checks.orders.rules[5]: ColumnValues: bounds must be numbers or "
                            "dates") and "'A'" in p for p in problems)
    assert not any(p.startswith("checks.orders.rules[6]") for p in problems)  # dates are
    assert any(p.startswith("checks.other.policy:") for p in problems)
    assert any(p.startswith("checks.other.rules:") for p in problems)


def test_great_expectations_names_and_arguments_are_checked_at_start_up(tmp_path):
    _, problems = parse_checks({"s": {"rules": [
        {"expect_column_values_to_be_purple": {"column": "x"}}]}})
    assert problems == ["checks: expect_column_values_to_be_purple: great-expectations has "
                        "no expectation ExpectColumnValuesToBePurple"]
    _, problems = parse_checks({"s": {"rules": [
        {"expect_column_mean_to_be_between": {"colum": "x"}}]}})
    assert len(problems) == 1 and "column" in problems[0]


@pytest.mark.spark  # starts Spark in a process of its own
def test_great_expectations_is_imported_only_for_jobs_with_rules():
    code = ("import sys; from framework import load_settings, run_job; import framework.cli; "
            "from framework.quality import parse_checks; "
            "parse_checks({'s': {'rules': [{'IsComplete': 'id'}]}}); "
            "print('great_expectations' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def _settings(root):
    from framework import load_settings

    return load_settings(conf_dir=root)


ORDERS_RULES = [
    {"IsComplete": "email"},
    {"IsPrimaryKey": "order_id"},
    {"ColumnValues": {"column": "amount", "between": [0, 10000]}},
    {"ColumnValues": {"column": "status", "in": ["new", "paid"]}},
    {"RowCount": {"at_least": 1}},
]


def land_orders(ws, rows):
    ws.batches += 1
    path = ws.landing / f"orders-{ws.batches:03}.json"
    path.write_text("".join(json.dumps(dict(zip(
        ("order_id", "email", "amount", "status"), row, strict=True))) + "\n" for row in rows))


GOOD = [(1, "a@x.com", 10.0, "new"), (2, "b@x.com", 20.0, "paid")]
BAD = [(3, "c@x.com", 30.0, "new"), (4, None, 40.0, "new"), (5, "e@x.com", -1.0, "lost"),
       (5, "f@x.com", 50.0, "paid"), (6, "g@x.com", 60.0, "paid")]


def table_rows(ws, path, *columns):
    df = delta_engine(ws.spark, mode="embedded").read(path)
    return sorted(tuple(r) for r in df.select(*columns).collect())


@pytest.mark.compat
def test_fail_policy_writes_nothing_and_keeps_the_bookmark(ws):
    _declare(ws, "fail")
    land_orders(ws, GOOD)
    assert ws.run().status == "succeeded"
    version = delta_engine(ws.spark, mode="embedded").version(ws.target)
    [bookmark] = ws.store.bookmarks("copy")
    land_orders(ws, BAD)
    with pytest.raises(JobFailedError) as exc:
        ws.run()
    error = exc.value.cause
    assert isinstance(error, DataQualityError)
    assert (error.job, error.ruleset, error.target) == ("copy", "orders", ws.target)
    assert len(error.failures) == 4
    assert 'IsComplete "email" (1 rows' in str(error)
    assert "and 1 more" in str(error) and "Nothing was written" in str(error)
    assert delta_engine(ws.spark, mode="embedded").version(ws.target) == version
    assert ws.store.bookmarks("copy") == [bookmark]
    results = ws.store.dq_results("copy")
    assert {r.action for r in results} == {"rejected"}
    assert {r.rule: r.outcome for r in results}['ColumnValues "status" in ["new", "paid"]'] == (
        "failed")
    assert ws.store.last_run("copy").status == "failed"
    # The rejected batch waits: the next run reads it again (and rejects it again).
    assert ws.run(dry_run=True).inputs["src"]["files"] == 1


def test_a_parquet_target_is_gated_the_same_way(ws):
    _declare(ws, "quarantine", sink="parquet")
    land_orders(ws, GOOD + BAD)
    ws.run()
    written = sorted(r.order_id for r in ws.spark.read.parquet(ws.target).collect())
    assert written == [1, 2, 3, 6]
    assert table_rows(ws, _quarantine(ws), "order_id") == [(4,), (5,), (5,)]
    _declare(ws, "fail", sink="parquet")
    land_orders(ws, BAD)
    with pytest.raises(JobFailedError):
        ws.run()
    assert sorted(r.order_id for r in ws.spark.read.parquet(ws.target).collect()) == written


def test_a_rejection_rolls_back_the_runs_earlier_writes_and_is_not_replayed(ws):
    archive, raw = str(ws.root / "lake" / "archive"), str(ws.root / "lake" / "raw")
    _declare(ws, "fail", archive=archive, raw=raw)
    land_orders(ws, GOOD)
    ws.run()
    land_orders(ws, BAD)
    for attempt in range(2):  # the second run reads the batch afresh: no replay
        with pytest.raises(JobFailedError):
            ws.run()
        failed = ws.store.last_run("copy")
        assert (failed.run_seq, failed.recovery) == (2 + attempt, None)
        assert f"rolled back: {archive}, {raw}" in failed.error
        assert table_rows(ws, archive, "order_id") == [(1,), (2,)]
        assert sorted(r.order_id for r in ws.spark.read.parquet(raw).collect()) == [1, 2]
        assert ws.run(dry_run=True).inputs["src"]["files"] == 1
    _declare(ws, "warn", archive=archive, raw=raw)
    ws.run()
    assert len(table_rows(ws, archive, "order_id")) == len(GOOD + BAD)
    # deltamark's own rollbacks are not another writer: a rewind restores past them.
    first = ws.store.runs("copy")[0]
    actions.rewind(ws.settings, "copy", to_run=first.run_id, restore_targets=True)
    assert table_rows(ws, archive, "order_id") == [(1,), (2,)]


@pytest.mark.compat
def test_quarantine_policy_splits_rows_and_counts_add_up(ws):
    _declare(ws, "quarantine")
    land_orders(ws, GOOD + BAD)
    report = ws.run()
    assert report.status == "succeeded"
    written = table_rows(ws, ws.target, "order_id")
    quarantined = table_rows(ws, _quarantine(ws), "order_id", "_dq_broken_rules", "_dq_run_id")
    assert written == [(1,), (2,), (3,), (6,)]
    assert sorted((r[0], sorted(r[1])) for r in quarantined) == [
        (4, ['IsComplete "email"']),
        (5, ['ColumnValues "amount" between 0 and 10000', 'ColumnValues "status" in ["new", '
             '"paid"]', 'IsPrimaryKey "order_id"']),
        (5, ['IsPrimaryKey "order_id"'])]
    assert {r[2] for r in quarantined} == {report.run_id}
    assert len(written) + len(quarantined) == len(GOOD + BAD)
    results = {r.rule: r for r in ws.store.dq_results("copy")}
    for rule, result in results.items():
        if result.unexpected_count is not None:
            assert result.unexpected_count == sum(rule in r[1] for r in quarantined), rule
    assert {r.action for r in results.values()} == {"quarantined"}
    # The bookmark moved: a second run has nothing new and is skipped.
    assert ws.run().status == "skipped"
    assert len(table_rows(ws, _quarantine(ws), "order_id")) == 3


def test_quarantine_policy_still_fails_on_a_table_level_rule(ws):
    _declare(ws, "quarantine", extra=[{"RowCount": {"at_least": 100}}])
    land_orders(ws, GOOD + BAD)
    with pytest.raises(JobFailedError) as exc:
        ws.run()
    assert "only row-level rules can quarantine rows" in str(exc.value.cause)
    assert not (ws.root / "lake" / "quarantine").exists()
    assert not (ws.root / "lake" / "target").exists()


def test_quarantine_is_exactly_once_across_a_crash_between_the_two_writes(ws):
    _declare(ws, "quarantine")
    land_orders(ws, GOOD + BAD)
    crashed = ws.start_run(DELTAMARK_CRASH_AT="target_committed:1")
    crashed.communicate(timeout=300)
    assert crashed.returncode == -9
    assert len(table_rows(ws, _quarantine(ws), "order_id")) == 3  # quarantine landed first
    assert not (ws.root / "lake" / "target").exists()
    report = ws.run()
    assert report.recovered.action == "replayed"
    assert table_rows(ws, ws.target, "order_id") == [(1,), (2,), (3,), (6,)]
    assert len(table_rows(ws, _quarantine(ws), "order_id")) == 3
    assert [r.attempt for r in ws.store.dq_results("copy")][:1] == [2]


def test_quarantine_commits_through_delta_rs_unless_the_table_needs_delta_spark(ws,
                                                                               delta_path):
    """On either path the quarantine table is appended by delta-rs (no Spark job rebuilds
    its snapshot); once its owner turns column mapping on, which delta-rs would write
    wrong, the native path writes it, and the embedded path refuses in one line."""
    _declare(ws, "quarantine")
    land_orders(ws, BAD)
    ws.run()
    log = ws.root / "lake" / "quarantine" / "_delta_log"

    def writer(version):
        [info] = [json.loads(line)["commitInfo"] for line in
                  (log / f"{version:020}.json").read_text().splitlines() if "commitInfo" in line]
        return "delta-spark" if "Delta-Lake" in info.get("engineInfo", "") else "delta-rs"

    assert writer(0) == "delta-rs"
    if not native_available(ws.spark):
        unavailable("column mapping is turned on by delta-spark: Delta's jars are not on "
                    "this Spark session (bash .ci/setup.sh resolves them with mvn)")
    ws.spark.sql(f"ALTER TABLE delta.`{_quarantine(ws)}` SET TBLPROPERTIES ("
                 "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
                 "'delta.minWriterVersion' = '5')")
    land_orders(ws, [(7, None, 1.0, "new")])
    if delta_path == "embedded":
        with pytest.raises(JobFailedError, match="columnMapping"):
            ws.run()
        return
    ws.run()
    assert writer(2) == "delta-spark"
    rows = ws.spark.read.format("delta").load(_quarantine(ws)).select("order_id", "email")
    assert sorted(tuple(r) for r in rows.collect()) == [(4, None), (5, "e@x.com"),
                                                        (5, "f@x.com"), (7, None)]


def test_warn_policy_writes_everything_and_records_the_failures(ws, caplog):
    _declare(ws, "warn")
    land_orders(ws, BAD)
    with caplog.at_level("WARNING"):
        assert ws.run().status == "succeeded"
    assert len(table_rows(ws, ws.target, "order_id")) == len(BAD)
    assert {r.action for r in ws.store.dq_results("copy")} == {"warned"}
    assert "written anyway" in caplog.text


def test_an_unknown_rule_set_name_is_a_job_error(ws):
    _declare(ws, "fail", name="nope")
    land_orders(ws, GOOD)
    with pytest.raises(JobFailedError) as exc:
        ws.run()
    assert isinstance(exc.value.cause, JobError)
    assert "checks='nope': no such rule set" in str(exc.value.cause)


def test_results_through_the_cli_and_sql(ws):
    _declare(ws, "quarantine")
    land_orders(ws, GOOD + BAD)
    report = ws.run()
    runner = CliRunner()
    base = ["--conf-dir", str(ws.conf)]
    text = runner.invoke(app, [*base, "dq", "results", "copy"])
    assert text.exit_code == 0, text.output
    assert f"run {report.run_id} (run 1, attempt 1): checks orders on {ws.target}" in text.output
    assert "7 rows, policy quarantine: quarantined" in text.output
    assert 'IsComplete "email"' in text.output
    as_json = json.loads(runner.invoke(app, [*base, "dq", "results", "copy", "--run",
                                             report.run_id, "--json"]).output)
    assert len(as_json) == len(ORDERS_RULES)
    assert {r["rule"]: r["unexpected_count"] for r in as_json}['IsComplete "email"'] == 1
    missing = runner.invoke(app, [*base, "dq", "results", "copy", "--run", "nope"])
    assert missing.exit_code == 1 and "run nope: not in the runs table" in missing.output
    sql = runner.invoke(app, [*base, "sql", "--json",
                              "SELECT outcome, COUNT(*) AS n FROM dq_results GROUP BY outcome "
                              "ORDER BY outcome"])
    assert json.loads(sql.output) == [{"outcome": "failed", "n": 4},
                                      {"outcome": "passed", "n": 1}]


def _quarantine(ws) -> str:
    return str(ws.root / "lake" / "quarantine")


def _declare(ws, policy, *, name="orders", extra=(), **params):
    ruleset = {"policy": policy, "rules": ORDERS_RULES + list(extra)}
    if policy == "quarantine":
        ruleset["quarantine"] = _quarantine(ws)
    ws.declare(cls="CheckedCopy", checks={"orders": ruleset}, ruleset=name, **params)
