"""Jobs with bookmarks end to end: real Spark, real Delta tables, real state tables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from databases import unavailable

from framework.delta import log
from framework.errors import (
    BookmarkOptionError,
    ConfigError,
    JobError,
    JobFailedError,
    JobNotFoundError,
    MissingContextError,
    SourceError,
)
from framework.sinks.delta import app_id


@pytest.mark.compat
def test_enable_reads_each_file_once_and_records_the_run(ws):
    ws.declare()
    ws.land()
    ws.land()
    first = ws.run()
    assert (first.run_seq, first.inputs["src"]["files"], first.status) == (1, 2, "succeeded")
    ws.land()
    second = ws.run()
    assert second.inputs["src"]["files"] == 1 and second.inputs["src"]["listed"] == 3
    third = ws.run(force=True)  # nothing new: forced, else it is skipped before Spark
    assert third.inputs["src"]["files"] == 0
    assert third.outputs[ws.target] == {"written": False}  # no files, no schema: no commit
    assert ws.ids() == [100, 101, 102, 200, 201, 202, 300, 301, 302]

    runs = ws.store.runs("copy")
    assert [(r.run_seq, r.status, r.mode, r.attempt) for r in runs] == [
        (1, "succeeded", "enable", 1), (2, "succeeded", "enable", 1),
        (3, "succeeded", "enable", 1)]
    assert runs[1].inputs["src"]["files"] == 1 and runs[1].arguments["landing"]
    assert len({r.run_id for r in runs}) == 3
    [bookmark] = ws.store.bookmarks("copy")
    assert (bookmark.run_seq, bookmark.state["files_total"]) == (3, 3)
    # The target commit names the run and carries the bookmarks it commits.
    assert log.transaction_version(ws.target, app_id("copy")) == 2
    meta = log.history(ws.target, limit=1)[0].user_metadata["deltamark"]
    src = meta["bookmarks"]["src"]
    assert (meta["run_seq"], src["kind"], src["state"]["files_total"]) == (2, "files", 3)
    # The files the run tracked, by name.
    assert [(p.rsplit("/", 1)[-1], outcome) for p, _, _, outcome in src["files"]] == [
        ("batch-003.json", "read")]


def test_a_file_landing_during_a_run_belongs_to_the_next_run(ws):
    ws.declare(cls="FileLandsDuringRun")
    ws.land(rows=1)
    assert ws.run().inputs["src"]["files"] == 1
    assert ws.ids() == [100]
    assert ws.run().inputs["src"]["files"] == 1  # the file that landed during run 1
    assert ws.ids() == [100, 1001]


def test_a_failed_run_leaves_the_bookmark_and_counts_attempts(ws):
    ws.declare()
    ws.land()
    ws.run()
    ws.land()
    ws.declare(cls="FailAfterRead")
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    assert failed.value.job == "copy" and "transform exploded" in str(failed.value)
    with pytest.raises(JobFailedError):
        ws.run()
    ws.declare()
    retry = ws.run()
    assert retry.inputs["src"]["files"] == 1  # the same file the failed runs had planned
    assert ws.ids() == [100, 101, 102, 200, 201, 202]
    runs = ws.store.runs("copy")
    assert [(r.run_seq, r.status, r.attempt) for r in runs] == [
        (1, "succeeded", 1), (2, "failed", 1), (3, "failed", 2), (4, "succeeded", 3)]
    assert "RuntimeError: transform exploded" in runs[1].error
    assert ws.store.bookmarks("copy")[0].run_seq == 4


def test_a_job_that_calls_sys_exit_ends_with_a_recorded_outcome(ws):
    ws.declare(cls="ExitsEarly", code="0")
    ws.land()
    assert ws.run().status == "succeeded"  # exit 0: the job ended early, successfully
    ws.declare(cls="ExitsEarly", code="3")
    ws.land()
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    assert "the job called sys.exit(3)" in str(failed.value)
    assert [r.status for r in ws.store.runs("copy")] == ["succeeded", "failed"]


@pytest.mark.parametrize("collect", ["", "yes"])
def test_a_udf_s_error_is_its_own_line(ws, collect):
    ws.declare(cls="UdfRaises", collect=collect)  # raised in a write, or in a collect
    ws.land(rows=1)
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    message = str(failed.value)
    assert "ValueError: order 100 has no customer" in message and "\n" not in message


@pytest.mark.compat  # job modules pickled by value, on each line's pyspark (cloudpickle)
def test_a_udf_in_a_job_file_runs_on_the_workers_and_one_without_deltamark_is_named(ws):
    """A job given as ``file.py:Class`` whose UDF calls deltamark's code: its functions
    reach Spark's Python workers; workers whose Python lacks deltamark (``python -S``, as
    on a machine without it) fail the run with one line naming the module."""
    import yaml

    ws.declare(cls="LabelledCopy")
    ws.land(rows=2)
    assert ws.run().status == "succeeded"
    from framework.delta import delta_engine

    labels = delta_engine(ws.spark, mode="embedded").read(ws.target).select("label").collect()
    assert sorted(r.label for r in labels) == ["orders/100", "orders/101"]

    bare_python = ws.root / "python-without-deltamark"
    bare_python.write_text(  # no site-packages; of PYTHONPATH, only Spark's own zips
        "#!/bin/sh\nPYTHONPATH=$(printf %s \"$PYTHONPATH\" | tr : '\\n' | grep /pyspark/ "
        f"| paste -sd: -)\nexport PYTHONPATH\nexec {sys.executable} -S \"$@\"\n")
    bare_python.chmod(0o755)
    (ws.conf / "deltamark.yaml").write_text(yaml.safe_dump({
        "state_root": str(ws.root / "state"),
        "spark": {"master": "local[1]", "conf": {"spark.pyspark.python": str(bare_python)}}}))
    ws.land(rows=1)
    run = ws.start_run()
    _, err = run.communicate(timeout=180)
    assert run.returncode == 1
    line = err.strip().splitlines()[-1]
    assert "Spark's Python workers cannot import 'framework'" in line
    assert "spark.pyspark.python" in line and "bookmarks unchanged" in line
    assert [r.status for r in ws.store.runs("copy")] == ["succeeded", "failed"]
    assert ws.store.bookmarks("copy")[0].run_seq == 1

def test_a_job_module_of_the_project_loads_from_anywhere_and_its_udf_runs(ws, tmp_path):
    """``class: package.module:Class`` names a module of the project (conf/'s parent
    directory), as the examples' ``jobs`` package, which is not installed: it imports when
    deltamark runs from another directory, and its UDF, calling a module beside it, runs
    on workers that cannot import the project."""
    package = ws.root / "pipeline"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "labels.py").write_text("def label(n):\n    return f'order-{n}'\n")
    (package / "copy_job.py").write_text(
        "from pyspark.sql import functions as F\n"
        "from framework import IncrementalJob\n"
        "from pipeline.labels import label\n\n"
        "class Copy(IncrementalJob):\n"
        "    def run(self, ctx):\n"
        "        df = ctx.read_files(ctx.params['landing'], format='json',\n"
        "                            transformation_ctx='src')\n"
        "        ctx.write_delta(df.withColumn('label', F.udf(label)('id')),\n"
        "                        ctx.params['target'])\n")
    (ws.conf / "jobs" / "copy.yaml").write_text(
        f"class: pipeline.copy_job:Copy\nparams: {{landing: {ws.landing}, "
        f"target: {ws.target}}}\n")
    ws.land(rows=2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "framework", "--conf-dir", str(ws.conf), "run", "copy"],
        cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    from framework.delta import delta_engine

    labels = delta_engine(ws.spark, mode="embedded").read(ws.target).select("label").collect()
    assert sorted(r.label for r in labels) == ["order-100", "order-101"]


def test_disable_reads_everything_and_keeps_the_bookmark(ws):
    ws.declare()
    ws.land()
    ws.run()
    ws.land()
    report = ws.run(bookmark="disable")
    assert report.inputs["src"]["files"] == 2 and report.mode == "disable"
    assert ws.store.bookmarks("copy")[0].run_seq == 1
    assert ws.run().inputs["src"]["files"] == 1  # enable again: only the second batch


def test_pause_reads_new_input_without_advancing(ws):
    ws.declare(bookmark="pause")
    ws.land()
    assert ws.run().inputs["src"]["files"] == 1
    assert ws.run().inputs["src"]["files"] == 1
    assert ws.store.bookmarks("copy") == []


@pytest.mark.compat
def test_pause_from_to_reads_exactly_the_input_between_two_runs(ws):
    ws.declare()
    run_ids = []
    for _ in range(3):
        ws.land()
        run_ids.append(ws.run().run_id)
    ws.land()
    report = ws.run(bookmark="pause", bookmark_from=run_ids[0], bookmark_to=run_ids[2])
    assert report.inputs["src"]["files"] == 2 and report.run_seq == 4
    assert report.planned_files["src"] == [str(ws.landing / "batch-002.json"),
                                           str(ws.landing / "batch-003.json")]
    assert ws.store.bookmarks("copy")[0].run_seq == 3
    assert ws.store.runs("copy")[-1].arguments["bookmark_from"] == run_ids[0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bookmark": "pause", "bookmark_from": "r1"}, "Missing option or value for --bookmark-to"),
    ({"bookmark": "pause", "bookmark_to": "r1"}, "Missing option or value for --bookmark-from"),
    ({"bookmark": "enable", "bookmark_from": "a", "bookmark_to": "b"}, "Invalid option(s)"),
    ({"bookmark": "disable", "bookmark_to": "b"}, "Invalid option(s)"),
    ({"bookmark": "sometimes"}, "is not one of enable, disable, pause"),
    ({"bookmark": "pause", "bookmark_from": "nope", "bookmark_to": "nada"},
     "nope and nada: not a run of this job"),
])
def test_invalid_bookmark_arguments_fail_before_anything_runs(ws, kwargs, message):
    ws.declare()
    with pytest.raises(BookmarkOptionError) as error:
        ws.run(**kwargs)
    assert error.value.job == "copy" and message in str(error.value)
    assert ws.store.runs("copy") == []


def test_pause_range_in_the_wrong_order(ws):
    ws.declare()
    first, second = ws.run().run_id, ws.run(force=True).run_id
    with pytest.raises(BookmarkOptionError, match="comes after"):
        ws.run(bookmark="pause", bookmark_from=second, bookmark_to=first)


def test_glue_mode_names_are_accepted(ws):
    ws.declare()
    ws.land()
    assert ws.run(bookmark="job-bookmark-pause").mode == "pause"
    assert ws.run(bookmark="continuation-ignore").mode == "disable"


def test_a_source_without_transformation_ctx_is_an_error_unless_unbookmarked(ws):
    ws.declare(cls="NoContext")
    ws.land()
    with pytest.raises(JobFailedError) as error:
        ws.run()
    assert isinstance(error.value.cause, MissingContextError)
    assert "without transformation_ctx" in str(error.value)
    assert ws.run(bookmark="disable").status == "succeeded"
    ws.declare(cls="NoContext", track="false")
    assert ws.run().inputs  # bookmark=False: read whole, nothing to commit
    assert ws.store.bookmarks("copy") == []


def test_arg_overrides_params_and_dry_run_records_nothing(ws):
    ws.declare(landing="/nowhere")
    ws.land()
    report = ws.run(args={"landing": str(ws.landing)}, dry_run=True)
    assert report.dry_run and report.inputs["src"]["files"] == 1
    assert report.planned_files["src"] == [str(ws.landing / "batch-001.json")]
    assert ws.store.runs("copy") == [] and not log.is_table(ws.target)
    with pytest.raises(JobFailedError) as error:
        ws.run()
    assert isinstance(error.value.cause, SourceError) and "/nowhere" in str(error.value)


def test_bounded_runs_and_same_second_files_end_to_end(ws):
    ws.declare(bounded_files="4")
    same = 1_700_000_000
    for _ in range(10):
        os.utime(ws.land(rows=1), (same, same))
    counts = [ws.run(force=True).inputs["src"] for _ in range(4)]
    assert [c["files"] for c in counts] == [4, 4, 2, 0]
    assert [c["backlog"] for c in counts] == [6, 2, 0, 0]
    assert ws.ids() == [i * 100 for i in range(1, 11)]


def test_exclusions_recursion_partitions_and_lineage(ws):
    ws.declare(exclusions='["**/skip/**", "*.tmp"]', lineage="source_file")
    for day in ("2026-01-01", "2026-01-02"):
        ws.land(rows=1, name=f"day={day}/orders.json")
    ws.land(rows=1, name="day=2026-01-02/skip/x.json")
    ws.land(rows=1, name="day=2026-01-02/partial.tmp")
    ws.land(rows=1, name="_SUCCESS")
    ws.run()
    from framework.delta import delta_engine

    rows = delta_engine(ws.spark, mode="embedded").read(ws.target).orderBy("id").collect()
    assert [(r.id, str(r.day)) for r in rows] == [(100, "2026-01-01"), (200, "2026-01-02")]
    assert rows[0].source_file.endswith("landing/day=2026-01-01/orders.json")


def test_file_names_spark_would_take_for_globs_are_read_as_named(ws):
    ws.declare(lineage="source_file")
    names = ["day=1/x[1].json", "day=1/x1.json", "day=1/{a,b}.json", "day=2/a.json",
             "day=2/star*.json", "day=3/é 100% #?.json", "day=3/[q].json"]
    for name in names:
        ws.land(rows=1, name=name)
    assert ws.run().inputs["src"]["files"] == len(names)
    from framework.delta import delta_engine

    rows = delta_engine(ws.spark, mode="embedded").read(ws.target).collect()
    assert sorted(r.id for r in rows) == [100 * (i + 1) for i in range(len(names))]
    lineage = {r.id: r.source_file.rsplit("/landing/", 1)[1] for r in rows}
    assert lineage[100] == "day=1/x%5B1%5D.json"
    assert sorted(r.day for r in rows) == [1, 1, 1, 2, 2, 3, 3]
    ws.land(rows=1, name="day=1/x[2].json")
    assert ws.run().inputs["src"]["files"] == 1 and len(ws.ids()) == len(names) + 1


def test_a_local_file_name_spark_cannot_read_is_named_before_anything_is_read(ws):
    ws.declare()
    ws.land(rows=1)
    odd = ws.land(rows=1, name="export 2026-01-01T10:00.json")
    with pytest.raises(JobFailedError, match="Spark cannot read a local file whose name "
                       "holds ':'") as failed:
        ws.run()
    assert str(odd) in str(failed.value)
    odd.rename(odd.with_name("export 2026-01-01T10-00.json"))
    assert ws.run().inputs["src"]["files"] == 2 and ws.ids() == [100, 200]


def test_a_root_named_like_a_partition_directory_is_not_a_column(ws):
    """Below a root named key=value only the directories under the root are columns."""
    ws.declare(landing=str(ws.landing / "source=web"))
    ws.land(rows=1, name="source=web/day=1/a.json")
    ws.land(rows=1, name="source=web/day=2/b[1].json")
    ws.run()
    from framework.delta import delta_engine

    rows = delta_engine(ws.spark, mode="embedded").read(ws.target).collect()
    assert sorted((r.id, r.day) for r in rows) == [(100, 1), (200, 2)]
    assert "source" not in rows[0].asDict()


def test_a_file_outside_the_partition_directories_of_the_others_is_an_error(ws):
    """Spark skips it without a word (its partition values are missing): deltamark
    refuses the run rather than bookmark a file it did not read."""
    ws.declare()
    ws.land(rows=1, name="day=1/a.json")
    stray = ws.land(rows=1, name="b.json")
    with pytest.raises(JobFailedError) as error:
        ws.run()
    message = str(error.value)
    assert str(stray) in message and "key=value" in message and "\n" not in message
    assert ws.store.bookmarks("copy") == []


def test_job_config_problems_are_reported_together(ws):
    (ws.conf / "jobs" / "bad.yaml").write_text(
        "class: nowhere.module:Job\nbookmark: sometimes\nparams: {a: [1]}\nextra: 1\n")
    with pytest.raises(ConfigError) as error:
        ws.run("bad")
    assert error.value.path.endswith("jobs/bad.yaml")
    text = "; ".join(error.value.problems)
    for expected in ("unknown key 'extra'", "bookmark: 'sometimes'", "params.a",
                     "class: cannot import 'nowhere.module' (ModuleNotFoundError: No module "
                     f"named 'nowhere'; modules are looked for in {ws.root} (the conf dir's "
                     "parent) and the installed packages)"):
        assert expected in text
    with pytest.raises(JobNotFoundError, match="jobs there: bad"):
        ws.run("missing")
    for outside in ("../deltamark", str(ws.conf / "jobs" / "bad")):  # files, not jobs
        with pytest.raises(JobNotFoundError, match="jobs there: bad"):
            ws.run(outside)
    (ws.conf / "jobs" / "team").mkdir()  # jobs are listed, leased, shown by one name
    (ws.conf / "jobs" / "team" / "x.yaml").write_text("class: nowhere.module:Job\n")
    with pytest.raises(JobError, match=r"job team/x: a job is a file directly in .*/jobs "
                       r"\(one name, no '/'\): move .*/jobs/team/x.yaml there"):
        ws.run("team/x")


def test_every_landed_file_is_read_once_whatever_its_modification_time(ws, tmp_path):
    ws.land(rows=1)
    ws.declare()
    ws.run()
    now = time.time()
    os.utime(ws.land(rows=1), (now - 2 * 86400, now - 2 * 86400))  # cp -p, tar x
    os.utime(ws.land(rows=1), (now + 3 * 86400, now + 3 * 86400))  # a clock days ahead
    # A tree copied in with rsync -a keeps the times of its source, a week old.
    elsewhere = tmp_path / "elsewhere" / "2026" / "11" / "19"
    elsewhere.mkdir(parents=True)
    (elsewhere / "old.json").write_text('{"id": 900}\n')
    os.utime(elsewhere / "old.json", (now - 7 * 86400, now - 7 * 86400))
    rsync = shutil.which("rsync")
    if rsync is None:
        unavailable("rsync is absent (.ci/test_tools.sh installs it)")
    subprocess.run([rsync, "-a", f"{tmp_path / 'elsewhere'}/", f"{ws.landing}/"], check=True)
    assert ws.run().inputs["src"]["files"] == 3
    assert ws.ids() == [100, 200, 300, 900]
    assert ws.run().status == "skipped"


def test_max_file_age_names_what_it_does_not_read(ws):
    ws.land(rows=1)
    ws.declare(max_file_age_s="86400")
    ws.run()
    old = ws.land(rows=1)
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    report = ws.run()  # not skipped: the file is named in this run
    assert report.inputs["src"]["too_old"] == 1 and report.inputs["src"]["files"] == 0
    assert report.set_aside == {"src": [(str(old), "too_old")]}
    tracked = ws.store.processed_files("copy", "src", paths=[str(old)])
    assert [(f.outcome, f.run_seq) for f in tracked] == [("too_old", 2)]
    assert ws.store.bookmarks("copy")[0].state["too_old_total"] == 1
    assert ws.ids() == [100]
    assert ws.run().status == "skipped"  # named once
    assert ws.run(force=True).set_aside == {}


def test_start_after_listing_reads_keys_out_of_order_at_reconciliation(ws):
    ws.land(rows=1, name="2026-11-26T10-00.json")
    ws.declare(listing="start_after")
    ws.run()
    ws.land(rows=1, name="2026-11-26T09-00.json")  # out of lexical order
    ws.land(rows=1, name="2026-11-26T11-00.json")
    report = ws.run()
    assert report.planned_files["src"] == [str(ws.landing / "2026-11-26T11-00.json")]
    assert ws.ids() == [100, 300]
    ws.declare(listing="start_after", reconcile_every_s="0")  # a full listing is due
    assert ws.run().planned_files["src"] == [str(ws.landing / "2026-11-26T09-00.json")]
    assert ws.ids() == [100, 200, 300]


@pytest.mark.parametrize(("policy", "expected"), [
    ("ignore", [100, 101]), ("reprocess", [100, 101, 100, 101, 102])])
def test_rewritten_files_follow_the_policy(ws, policy, expected):
    ws.declare(rewritten=policy)
    path = ws.land(rows=2)
    ws.run()
    path.write_text("".join(json.dumps({"id": 100 + i}) + "\n" for i in range(3)))
    report = ws.run()  # a rewrite is read again, or named once
    assert report.inputs["src"]["rewritten_skipped"] == (1 if policy == "ignore" else 0)
    assert ws.ids() == sorted(expected)
    assert ws.run().status == "skipped"
