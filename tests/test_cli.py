import datetime as dt
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from framework.cli import app
from framework.state.table_io import open_store
from state_tables.model import Bookmark, Run, WorkflowNode

runner = CliRunner()


@pytest.fixture
def state(tmp_path):
    store = open_store(tmp_path / "state")
    for seq in (1, 2):
        store.record_run(
            Run(job="orders", run_id=f"r{seq}", run_seq=seq, status="succeeded", mode="enable",
                started_at=dt.datetime(2026, 1, seq, tzinfo=dt.UTC)),
            bookmarks=[Bookmark(job="orders", context="src", run_id=f"r{seq}", run_seq=seq,
                      source_kind="custom", state={"high_water": seq})])
    return str(tmp_path / "state")


def invoke(*args):
    return runner.invoke(app, list(args))


def test_runs_list_json_is_only_a_json_array(state):
    result = invoke("--state-root", state, "runs", "list", "orders", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["run_id"], r["run_seq"], r["status"]) for r in rows] == [
        ("r1", 1, "succeeded"), ("r2", 2, "succeeded")]
    assert rows[0]["started_at"] == "2026-01-01T00:00:00+00:00"


def test_runs_list_text_table(state):
    result = invoke("--state-root", state, "runs", "list")
    lines = result.stdout.splitlines()
    zone = dt.datetime.now().astimezone().tzname()
    assert lines[0].split() == ["job", "run", "status", "mode", "started", f"({zone})", "took",
                                "read", "wrote", "run_id", "note"]
    assert len(lines) == 3 and lines[2].split()[:4] == ["orders", "2", "succeeded", "enable"]
    local = dt.datetime(2026, 1, 2, tzinfo=dt.UTC).astimezone()
    assert f"{local:%Y-%m-%d %H:%M:%S}" in lines[2]


@pytest.fixture
def hourly(tmp_path):
    """An hourly job: run 1 read a file and wrote a version, runs 2 to 25 found nothing new,
    run 26 read again and failed; and a workflow run of it after each."""
    store = open_store(tmp_path / "state")
    began = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)
    read = {"src": {"files": 1, "listed": 3, "bytes": 127706, "backlog": 0,
                    "rewritten_skipped": 0}}
    for seq in range(1, 27):
        started = began + dt.timedelta(hours=seq)
        status = "succeeded" if seq == 1 else "failed" if seq == 26 else "skipped"
        store.record_run(Run(
            job="orders_ingest", run_id=f"r{seq}", run_seq=seq, status=status, mode="enable",
            started_at=started, ended_at=started + dt.timedelta(seconds=8.2),
            inputs={} if status == "skipped" else read,
            outputs={"lake/orders": {"written": True, "version": 0}} if seq == 1 else {},
            error="DataQualityError: job orders_ingest: checks failed" if seq == 26 else None))
        store.record_workflow_nodes([WorkflowNode(
            workflow="orders_pipeline", workflow_run_id=f"w{seq}", job="orders_ingest",
            trigger="start", state="FAILED" if seq == 26 else "SUCCEEDED", run_id=f"r{seq}",
            started_at=started, ended_at=started + dt.timedelta(seconds=8.2))])
    return str(tmp_path / "state")


def test_runs_list_says_what_each_run_did_in_words_and_folds_the_skipped_ones(hourly):
    lines = invoke("--state-root", hourly, "runs", "list").stdout.splitlines()
    assert len(lines) == 4  # the header, run 1, runs 2 to 25 on one line, run 26
    assert "src: 1 of 3 files (128 KB)" in lines[1] and "lake/orders: version 0" in lines[1]
    assert " 8.2 s " in lines[1]
    assert lines[2].split()[:4] == ["orders_ingest", "2-25", "skipped", "x24"]
    assert "nothing new, until" in lines[2]
    assert lines[3].split()[:3] == ["orders_ingest", "26", "failed"]
    assert lines[3].rstrip().endswith("DataQualityError: job orders_ingest: checks failed")
    shown = invoke("--state-root", hourly, "runs", "list", "--skipped", "show").stdout
    assert len(shown.splitlines()) == 27 and shown.count("nothing new") == 24
    hidden = invoke("--state-root", hourly, "runs", "list", "--skipped", "hide")
    assert [line.split()[1] for line in hidden.stdout.splitlines()[1:]] == ["1", "26"]
    raw = json.loads(invoke("--state-root", hourly, "runs", "list", "--skipped", "hide",
                            "--last", "2", "--json").stdout)
    assert [r["run_seq"] for r in raw] == [1, 26]  # the newest two that were not skipped
    assert raw[1]["inputs"] == {"src": {"files": 1, "listed": 3, "bytes": 127706,
                                        "backlog": 0, "rewritten_skipped": 0}}
    assert len(json.loads(invoke("--state-root", hourly, "runs", "list", "--json").stdout)) == 26


def test_workflow_runs_and_status_say_which_jobs_found_nothing_new(hourly):
    listed = invoke("--state-root", hourly, "workflow", "runs", "orders_pipeline", "--limit",
                    "30").stdout.splitlines()
    assert len(listed) == 4  # the header, w26, w2 to w25 on one line, w1 (newest first)
    assert listed[1].split()[:2] == ["w26", "FAILED"]
    assert listed[2].startswith("24 runs") and "skipped: nothing new" in listed[2]
    assert listed[3].split()[:2] == ["w1", "SUCCEEDED"] and "1 SUCCEEDED" in listed[3]
    raw = json.loads(invoke("--state-root", hourly, "workflow", "runs", "orders_pipeline",
                            "--limit", "30", "--json").stdout)
    assert [(r["jobs"], r["nothing_new"]) for r in raw if r["workflow_run_id"] == "w2"] == [
        ({"SUCCEEDED": 1}, 1)]
    shown = invoke("--state-root", hourly, "workflow", "status", "orders_pipeline", "--run",
                   "w25").stdout
    assert "skipped: nothing new" in shown and shown.rstrip().endswith(" 8.2 s")


def test_a_state_root_without_state_says_so_in_one_line(tmp_path):
    empty = str(tmp_path / "elsewhere")
    for args in (["runs", "list"], ["runs", "list", "--json"],
                 ["workflow", "status", "orders_pipeline"]):
        result = invoke("--state-root", empty, *args)
        assert result.exit_code == 0, result.output
        [said] = result.stderr.splitlines()
        assert said.startswith(f"no deltamark state at {empty}: ")
        assert "deltamark --state-root PATH, DELTAMARK_STATE_ROOT or state_root in" in said
    assert json.loads(invoke("--state-root", empty, "runs", "list", "--json").stdout) == []


def test_bookmarks_show(state):
    result = invoke("--state-root", state, "bookmarks", "show", "orders", "--ctx", "src", "--json")
    [row] = json.loads(result.stdout)
    assert (row["context"], row["run_seq"], row["state"]) == ("src", 2, {"high_water": 2})
    open_store(state).record_run(Run(job="fresh", run_id="f1", run_seq=1, status="failed",
                                     mode="enable", started_at=dt.datetime.now(dt.UTC)))
    empty = invoke("--state-root", state, "bookmarks", "show", "fresh")
    assert empty.exit_code == 0 and "no bookmarks yet" in empty.stdout


def test_sql_json(state):
    result = invoke("--state-root", state, "sql", "select run_id from runs order by run_seq",
                    "--json")
    assert json.loads(result.stdout) == [{"run_id": "r1"}, {"run_id": "r2"}]


def test_runtime_errors_are_one_line_on_stderr_with_exit_1(state):
    result = invoke("--state-root", state, "sql", "drop table runs")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: sql: refused, the statement is a DropTable")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("bookmarks", "reset", "orders", "--ctx", "typo"),
    ("bookmarks", "rewind", "orders", "--to-run", "r1", "--ctx", "typo"),
    ("runs", "list", "nosuch"),
    ("bookmarks", "show", "nosuch"),
    ("workflow", "status", "nosuch"),
    ("workflow", "runs", "nosuch"),
    ("workflow", "stop", "nosuch"),
])
def test_an_unknown_job_context_or_workflow_is_an_error_naming_the_known_ones(state, args):
    result = invoke("--state-root", state, *args)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert "typo" in line and "src" in line if "typo" in args else "nosuch" in line
    if "typo" in args:
        assert open_store(state).bookmarks("orders")[0].state == {"high_water": 2}
    elif args[0] != "workflow":
        assert "orders" in line  # the jobs it knows


@pytest.mark.parametrize("damage", ["first commit", "gap", "garbage"])
def test_a_damaged_state_table_is_one_line_naming_it(state, damage):
    log_dir = os.path.join(state, "runs", "_delta_log")
    first, second = (os.path.join(log_dir, f"{v:020}.json") for v in (0, 1))
    if damage == "first commit":
        os.remove(first)
    elif damage == "gap":
        runner.invoke(app, ["--state-root", state, "bookmarks", "reset", "orders"])
        open_store(state).record_run(Run(job="orders", run_id="r3", run_seq=3,
                                         status="running", mode="enable",
                                         started_at=dt.datetime(2026, 1, 3, tzinfo=dt.UTC)))
        os.remove(second)
    else:
        with open(second, "w") as garbled:
            garbled.write("{not json\n")
    result = subprocess.run([sys.executable, "-m", "framework", "--state-root", state, "runs",
                             "list"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert os.path.join(state, "runs") in line and "_delta_log is damaged" in line
    assert "state repair" in line


def test_a_job_module_that_fails_to_import_is_one_line_and_json_with_json(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "deltamark.yaml").write_text(f"state_root: {tmp_path / 'state'}\n")
    (tmp_path / "broken.py").write_text("import os\nraise RuntimeError('no config here')\n")
    (tmp_path / "jobs" / "broken.yaml").write_text("class: broken.py:Job\n")
    result = invoke("--conf-dir", str(tmp_path), "run", "broken", "--json")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert "RuntimeError: no config here at " in line and "broken.py:2" in line
    failure = json.loads(result.stdout)
    assert (failure["status"], failure["error_type"]) == ("failed", "ConfigError")
    assert failure["error"] == line.removeprefix("error: ")


def test_bad_config_is_a_runtime_error_naming_the_file(tmp_path):
    (tmp_path / "deltamark.yaml").write_text("delta: maybe\n")
    result = invoke("--conf-dir", str(tmp_path), "runs", "list")
    assert result.exit_code == 1
    assert "deltamark.yaml" in result.stderr and "delta: 'maybe'" in result.stderr


def test_usage_errors_exit_2(state):
    assert invoke("runs", "lst").exit_code == 2
    assert invoke("--state-root", state, "runs", "list", "--jsn").exit_code == 2
    assert invoke("sql").exit_code == 2


def test_debug_shows_the_traceback(state):
    result = invoke("--debug", "--state-root", state, "sql", "drop table runs")
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "ReadOnlySqlError"


def test_real_processes_exit_0_and_import_neither_spark_nor_pandas(state):
    """delta-rs can abort processes at exit (code 134); the CLI must not, ever. Nor do
    they import Spark, its Delta engines or pandas. (How fast they are: bench_noop's
    read-only commands.)"""
    probe = ("import sys, runpy; sys.argv = ['deltamark'] + sys.argv[1:]; "
             "import atexit; atexit.register(lambda: print(sorted({'pyspark', 'pandas', "
             "'pydantic', 'great_expectations', 'framework.delta.embedded', "
             "'framework.delta.native'} & set(sys.modules)) or 'NOJVM', "
             "file=sys.stderr)); runpy.run_module('framework', run_name='__main__')")
    for args in (["runs", "list", "--json"], ["bookmarks", "show", "orders", "--json"],
                 ["sql", "select * from current_bookmarks", "--json"],
                 ["dq", "results", "orders", "--json"],
                 ["workflow", "status", "orders_pipeline", "--json"]):
        done = subprocess.run([sys.executable, "-c", probe, "--state-root", state, *args],
                              capture_output=True, text=True, env={**os.environ}, timeout=60)
        assert done.returncode == 0, (args, done.returncode, done.stderr)
        # pandas was a third of a command's time (pyarrow imports it on its own far too
        # easily); typer's pydantic, a sixth
        assert done.stderr.strip().endswith("NOJVM"), done.stderr
        json.loads(done.stdout)


def test_a_moved_module_s_old_path_still_imports_and_runs_with_a_warning():
    """framework/ grouped by concern (0.2): ``python -m framework.jars`` (the old path) runs
    the module now at framework.spark.jars, as the old import paths import theirs, each
    with a DeprecationWarning naming the new path."""
    command = [sys.executable, "-W", "always::DeprecationWarning", "-m"]
    old = subprocess.run([*command, "framework.jars", "--class-path"], capture_output=True,
                         text=True, timeout=60)
    new = subprocess.run([*command, "framework.spark.jars", "--class-path"],
                         capture_output=True, text=True, timeout=60)
    assert (old.returncode, old.stdout) == (new.returncode, new.stdout) and new.stdout
    assert "framework.jars is now framework.spark.jars" in old.stderr
    assert "DeprecationWarning" not in new.stderr
    imports = ("import warnings, sys; warnings.simplefilter('error'); import framework.cli\n"
               "warnings.simplefilter('always')\n"
               "with warnings.catch_warnings(record=True) as said:\n"
               "    from framework import runner, job_config\n"
               "    from framework.spark import spark_session\n"
               "    from framework.admin import rewind, require_job\n"
               "from framework.run import runner as now, spec\n"
               "from framework.spark.session import spark_session as session\n"
               "from framework.ops import actions, admin\n"
               "assert runner is now and job_config is spec and spark_session is session\n"
               "assert rewind is actions.rewind and require_job is admin.require_job\n"
               "print('|'.join(str(w.message).split(';')[0] for w in said))\n")
    done = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split("|") == [
        "framework.runner is now framework.run.runner",
        "framework.job_config is now framework.run.spec",
        "framework.spark.spark_session is now framework.spark.session.spark_session",
        "framework.admin is now framework.ops.admin"]


def invoke_wide(*args):
    return runner.invoke(app, list(args), env={"COLUMNS": "400"}).output


def _commands(command, path=()):
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_text_is_shown_whole_each_paragraph_on_one_line():
    # on a terminal wide enough, a paragraph is one line: the docstring's line breaks are
    # not kept (typer's Rich mode kept them), and nothing is taken for markup and dropped
    # (as <JOB> once was)
    import re

    import typer

    for path, command in _commands(typer.main.get_command(app)):
        shown = invoke_wide(*path, "--help").splitlines()
        lines = [" ".join(re.sub(r"[│╭╮╰╯─]", " ", line).split()) for line in shown]
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        for paragraph in (p for text in texts for p in text.split("\n\n") if p.strip()):
            one_line = " ".join(paragraph.split())
            assert any(one_line in line for line in lines), (path, paragraph)


def test_a_run_report_names_the_files_it_did_not_read():
    from framework.cli.run import _text
    from framework.run.runner import RunReport

    report = RunReport(job="copy", run_id="r2", run_seq=2, attempt=1, mode="enable",
                       status="succeeded", dry_run=False, seconds=1.5,
                       inputs={"src": {"files": 1, "bytes": 9, "listed": 14, "backlog": 0,
                                       "rewritten_skipped": 1, "too_old": 22}},
                       set_aside={"src": [(f"/in/old-{i:02}.json", "too_old")
                                          for i in range(22)]
                                  + [("/in/a.json", "rewritten")]})
    lines = _text(report).splitlines()
    assert lines[1] == ("  read  src: 1 of 14 files (9 bytes), 1 rewritten file skipped, 22 "
                        "older than max_file_age")
    assert lines[2] == "  not read, older than max_file_age: 22 files"
    assert lines[3] == "        /in/old-00.json" and lines[23] == "        ... and 2 more"
    assert lines[24:] == ["  not read, rewritten since read (rewritten='ignore'): 1 files",
                          "        /in/a.json"]


def test_a_state_root_whose_storage_does_not_answer_is_one_line(monkeypatch):
    for name, value in (("AWS_ENDPOINT_URL", "http://127.0.0.1:9"), ("AWS_ACCESS_KEY_ID", "x"),
                        ("AWS_SECRET_ACCESS_KEY", "y"), ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    result = invoke("--state-root", "s3://nobucket/state", "runs", "list")
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: Delta table s3://nobucket/state/runs: its storage cannot "
                           "be reached (")
    assert "Connection refused" in line and "AWS_ENDPOINT_URL" in line
