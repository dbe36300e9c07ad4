"""The one error hierarchy of deltamark.

Every error starts its message with its context (file, table, job) and ends with what to
do. The CLI prints ``str(error)`` as one line on stderr and exits 1. The root,
``DeltamarkError``, and the state tables' errors are defined below ``framework``, in
``state_tables.errors``, and handed on here.
"""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Mapping, Sequence

from framework.common.redaction import redact
from state_tables.errors import DeltamarkError, ReadOnlySqlError, StateSchemaError

__all__ = [
    "BookmarkOptionError",
    "CatalogError",
    "ChangesUnavailableError",
    "ConcurrentRunError",
    "ConfigError",
    "ConstraintViolationError",
    "DamagedTableError",
    "DataQualityError",
    "DatabaseError",
    "DeltaEngineUnavailableError",
    "DeltaTableError",
    "DeltamarkError",
    "GlueArgumentError",
    "GlueCatalogError",
    "GlueRulesetError",
    "GlueUnsupportedAttributeError",
    "GlueUnsupportedError",
    "IcebergError",
    "JobError",
    "JobFailedError",
    "JobNotFoundError",
    "MissingContextError",
    "MissingExtraError",
    "ReadOnlySqlError",
    "RepairError",
    "RewindError",
    "RunNotFoundError",
    "RunStateError",
    "RunStopped",
    "SchemaMismatchError",
    "ServerError",
    "SourceError",
    "SparkFeatureError",
    "SparkStartError",
    "SparkVersionError",
    "StateBehindTargetsError",
    "StateSchemaError",
    "TableNotFoundError",
    "TransformError",
    "UnsupportedTableFeatureError",
    "VersionNotFoundError",
    "WorkflowError",
    "WorkflowNotFoundError",
    "WriteConflictError",
    "is_java_trace",
    "java_summary",
    "one_line",
]

# every error's text, whichever package raised it, masks the secrets this process resolved
DeltamarkError.redact = redact


class ConfigError(DeltamarkError):
    """One or more problems in a configuration file, reported together.

    Attributes:
        path: the file (or directory) that holds the problems.
        problems: one line per problem, each naming the key.
    """

    def __init__(self, path: str, problems: Sequence[str]):
        self.path = path
        self.problems = tuple(problems)
        super().__init__(f"{path}: {'; '.join(self.problems)}. Fix the file and run again.")


class JobNotFoundError(DeltamarkError):
    """No ``conf/jobs/<name>.yaml`` for the job asked for."""

    def __init__(self, job: str, conf_dir: str, known: Sequence[str]):
        self.job = job
        listed = ", ".join(known) if known else "none"
        super().__init__(f"job {job}: no {conf_dir}/jobs/{job}.yaml (jobs there: {listed}). "
                         "Check the name or --conf-dir.")


class JobError(DeltamarkError):
    """A problem with how a job is run or what it asks for; ``job`` names it, ``message``
    says what (without the job)."""

    def __init__(self, job: str, message: str):
        self.job, self.message = job, message
        super().__init__(f"job {job}: {message}")


class BookmarkOptionError(JobError):
    """Bookmark mode options that do not fit together (Glue's argument errors)."""


class MissingContextError(JobError):
    """A bookmarked source was read without a ``transformation_ctx``."""

    def __init__(self, job: str, source: str):
        self.source = source
        super().__init__(
            job, f"{source} is read without transformation_ctx, so its bookmark cannot be "
            "kept. Pass transformation_ctx='<name>', or bookmark=False to read it whole on "
            "every run.")


class ConcurrentRunError(JobError):
    """Another run of the same job holds the job's lease."""

    def __init__(self, job: str, holder: Mapping[str, object]):
        self.holder = dict(holder)
        who = (f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')} on "
               f"{holder.get('host', '?')}, since {holder.get('since', '?')})")
        super().__init__(
            job, f"{who} is running; one run of a job at a time. Wait for it to finish, or "
            "stop that process: its lease ends with it and the next run recovers its work.")


class RunNotFoundError(DeltamarkError):
    """No run with this id in the runs table."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        super().__init__(f"run {run_id}: not in the runs table. See deltamark runs list.")


class RunStateError(JobError):
    """A run cannot be changed the way asked (e.g. aborting a run whose data landed)."""


class RewindError(JobError):
    """A rewind, reset, bookmark set or target restore that cannot be done safely."""


class StateBehindTargetsError(JobError):
    """A target holds a run of the job that the state does not know: the state root was
    restored from a backup or lost commits. Writing on would lose or repeat input."""

    def __init__(self, job: str, target: str, held_seq: int, held_id: str, known_seq: int,
                 known_id: str):
        self.target, self.held_seq, self.held_id = target, held_seq, held_id
        super().__init__(
            job, f"target {target} holds run {held_seq} ({held_id}) of this job, but the "
            f"state's run {known_seq} is {known_id}: the state root is behind its targets "
            "(restored from a backup, or its newest commits lost). Nothing was written. Run "
            f"'deltamark state repair {job}' to rebuild the missing runs from the targets.")


class RepairError(JobError):
    """The state cannot be rebuilt from the targets as asked."""


class SourceError(JobError):
    """A source cannot be planned or read (bad path, format or option); names the context."""

    def __init__(self, job: str, context: str, message: str):
        self.context = context
        super().__init__(job, f"source {context}: {message}")


class DatabaseError(DeltamarkError):
    """A database refused a connection or query, or does not have what a read needs."""

    def __init__(self, source: str, message: str):
        self.source = source
        super().__init__(f"{source}: {message}")


class TransformError(DeltamarkError):
    """A transform (e.g. relationalize) cannot work on this data; names the table."""

    def __init__(self, table: str, message: str):
        self.table = table
        super().__init__(f"{table}: {message}")


class ChangeRecordsError(DeltamarkError):
    """Change records a write cannot apply (``mode="apply_changes"``): bad options, a
    missing column, a NULL key or sequence; ``target`` names the table."""

    def __init__(self, target: str, message: str):
        self.target = target
        super().__init__(f"{target}: apply_changes: {message}")


class DataQualityError(JobError):
    """A rule set gating a target write failed: nothing was written.

    Attributes:
        ruleset, target: the checks and the table they gate.
        failures: each failing rule's one-line summary (all of them; the message shows
            the first three).
    """

    def __init__(self, job: str, ruleset: str, target: str, failures: Sequence[str],
                 hint: str):
        self.ruleset, self.target, self.failures = ruleset, target, tuple(failures)
        shown = "; ".join(self.failures[:3])
        more = f"; and {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
        super().__init__(
            job, f"checks {ruleset} failed for {target}: {shown}{more}. Nothing was "
            f"written; {hint}")


class GlueArgumentError(DeltamarkError):
    """A Glue script's arguments do not parse (``getResolvedOptions``); Glue's wording."""


class GlueCatalogError(DeltamarkError):
    """A table a Glue script reads or writes ``from_catalog`` is not in the local catalog
    (``catalog:`` in conf/deltamark.yaml)."""


class GlueRulesetError(DeltamarkError):
    """A DQDL ruleset given to ``EvaluateDataQuality`` that deltamark cannot evaluate."""

    def __init__(self, context: str, problem: str):
        self.context = context
        super().__init__(f"EvaluateDataQuality ruleset of {context}: {problem}. The rule "
                         "types evaluated are listed in docs/glue.md.")


class GlueUnsupportedError(DeltamarkError):
    """A Glue call deltamark does not provide; names the call and the alternative."""

    def __init__(self, call: str, alternative: str):
        self.call = call
        super().__init__(f"{call}: not supported by deltamark's Glue layer; {alternative}.")


class GlueUnsupportedAttributeError(GlueUnsupportedError, AttributeError):
    """A Glue method or attribute deltamark does not provide (an ``AttributeError`` too, so
    ``hasattr`` says False)."""


class WorkflowNotFoundError(DeltamarkError):
    """No ``conf/workflows/<name>.yaml`` for the workflow asked for."""

    def __init__(self, workflow: str, conf_dir: str, known: Sequence[str]):
        self.workflow = workflow
        super().__init__(f"workflow {workflow}: no {conf_dir}/workflows/{workflow}.yaml "
                         f"(workflows there: {', '.join(known) or 'none'}). Check the name or "
                         "--conf-dir.")


class WorkflowError(DeltamarkError):
    """A workflow cannot be run, resumed or exported as asked; ``workflow`` names it."""

    def __init__(self, workflow: str, message: str):
        self.workflow = workflow
        super().__init__(f"workflow {workflow}: {message}")


class JobFailedError(JobError):
    """The job's code raised; the run is recorded as failed and no bookmark moved."""

    def __init__(self, job: str, run_id: str, cause: BaseException):
        self.run_id, self.cause = run_id, cause
        self.exit_code = getattr(cause, "exit_code", 1)
        super().__init__(
            job, f"run {run_id} failed: {one_line(cause)} (bookmarks unchanged; the next "
            "run reads the same input). --debug shows the traceback.")


class RunStopped(DeltamarkError):  # noqa: N818 - a stop, not an error
    """The run's process was told to stop (SIGTERM: ``deltamark workflow stop``, a time
    limit, an operator). The run ends failed, so its bookmarks stay; its next run recovers
    what it had landed. The command exits 128 + the signal's number, as a shell's would."""

    def __init__(self, signum: int):
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def one_line(cause: BaseException) -> str:
    """The cause in one line: a JVM error gives its first and root messages, a Python
    UDF's its own error; a module that Spark's Python workers could not import (their
    traceback is inside a Spark error, whose first line says nothing) is named."""
    text = str(cause).strip()
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", text)
    if missing and not isinstance(cause, ImportError | DeltamarkError):  # from Spark's side
        return (f"Spark's Python workers cannot import '{missing[1]}': install deltamark and "
                "the job's modules into the Python that executors run (spark.pyspark.python "
                "or PYSPARK_PYTHON names it, at one path on every worker), or ship them with "
                "spark-submit --py-files")
    if is_java_trace(text):
        return java_summary(text)
    if type(cause).__name__ == "PythonException":  # a UDF's: its error ends its traceback
        return f"PythonException: {text.splitlines()[-1]}"
    return f"{type(cause).__name__}: {text.splitlines()[0] if text else ''}"


def is_java_trace(text: str) -> bool:
    """Whether ``text`` is py4j's message of a JVM error (a stack trace)."""
    return text.startswith("An error occurred while calling")


_JAVA_EXCEPTION = re.compile(r"^(?:: |Caused by: )?([\w.$]+(?:Exception|Error)): (.*)$")
_SPARK_NOISE = re.compile(r"\s*SQLSTATE: \w+|\[[A-Z_.]+\] ")
_TASK_FAILED = re.compile(r"Job aborted due to stage failure: .*?most recent failure: Lost task "
                          r".*?\): ([\w.$]+(?:Exception|Error)): ")


def java_summary(text: str) -> str:
    """A JVM error in one line: the message of the exception naming the file Spark was
    reading (else the first) and its root cause's, without Spark's error classes nor where
    a failed task ran."""
    messages = [(m[1].rsplit(".", 1)[-1], _SPARK_NOISE.sub("", m[2]).strip())
                for m in map(_JAVA_EXCEPTION.match, text.splitlines()) if m]
    if not messages:
        return text.splitlines()[0]
    # the message naming the file being read, if one does, says more than the first
    kind, first = next((m for m in messages if "reading file" in m[1]), messages[0])
    if failed := _TASK_FAILED.match(first):  # the task's own error, not where it ran
        kind, first = failed[1].rsplit(".", 1)[-1], first[failed.end():]
    root_kind, root = messages[-1]
    said = f"{kind}: {first}"
    return said if root == first else f"{said} Cause: {root_kind}: {root}"


class MissingExtraError(DeltamarkError):
    """An optional dependency of deltamark's is missing from this Python (the driver's):
    the message names the extra that installs it."""

    #: pyproject's optional-dependencies: a module's top package -> the extra with it
    EXTRAS: Mapping[str, str] = {"pyiceberg": "iceberg", "sqlalchemy": "iceberg",
                                 "boto3": "sqs", "openlineage": "lineage"}

    def __init__(self, missing: ImportError, needed_for: str):
        self.module = (missing.name or "").split(".")[0]
        extra = self.EXTRAS.get(self.module)
        install = f"pip install 'deltamark[{extra}]'" if extra else \
            f"install {self.module or one_line(missing)}"
        super().__init__(f"{needed_for} needs {self.module or 'a module'}, which this "
                         f"Python ({sys.executable}) does not have: {install}")


class SparkStartError(DeltamarkError):
    """The Spark session could not start."""


class SparkFeatureError(DeltamarkError):
    """A feature the running Spark does not offer (a newer line, or a JVM in this process
    where the session is Spark Connect's); the message says what would."""


class SparkVersionError(SparkStartError):
    """The installed pyspark (``version``; None: there is none) is of a Spark line deltamark
    does not support (``supported`` names the range)."""

    def __init__(self, version: str | None, supported: str):
        self.version, self.supported = version, supported
        if version is None:
            super().__init__(
                f"pyspark is not installed: deltamark runs on {supported}. Install it with "
                "pip install 'deltamark[spark]' (the newest line), or install your "
                "platform's pyspark beside deltamark")
        else:
            super().__init__(
                f"Spark {version} is not supported: deltamark runs on {supported}. Install "
                "a pyspark of those lines, or run on a cluster of one")


class ServerError(DeltamarkError):
    """A deltamark server could not be started, reached or used; ``where`` names it (its
    socket or directory), ``message`` says what and what to do."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message
        super().__init__(f"deltamark server {where}: {message}")


class DeltaEngineUnavailableError(DeltamarkError):
    """The configured Delta path cannot be used on this Spark session."""


class BookmarkStateError(DeltamarkError):
    """A bookmark state this deltamark cannot read: an unknown source kind, a state
    version newer than its own, or a damaged state."""

    def __init__(self, kind: str, problem: str):
        self.kind = kind
        super().__init__(f"bookmark state of source kind '{kind}': {problem}")


class DeltaTableError(DeltamarkError):
    """A problem with one Delta table; ``path`` names it."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"Delta table {path}: {message}")


class DamagedTableError(DeltaTableError):
    """A Delta table whose log cannot be read (missing or garbled commit files)."""

    def __init__(self, path: str, damage: str):
        super().__init__(
            path, f"its _delta_log is damaged: {damage}. Restore the table from a backup "
            "(for a deltamark state table, then run 'deltamark state repair JOB' for each "
            "job to rebuild what the backup lacks from the targets).")


class StorageUnreachableError(DeltaTableError):
    """The storage holding a Delta table did not answer (an object store's endpoint,
    network or credentials)."""

    def __init__(self, path: str, reason: str):
        super().__init__(path, f"its storage cannot be reached ({reason}). Check the endpoint "
                         "(AWS_ENDPOINT_URL or the bucket's endpoint in conf), the network "
                         "and the credentials.")


class TableNotFoundError(DeltaTableError):
    def __init__(self, path: str):
        super().__init__(path, "no Delta table there (no _delta_log). Check the path.")


class VersionNotFoundError(DeltaTableError):
    """The requested version or timestamp is outside the table's reachable history."""

    def __init__(self, path: str, wanted: str, detail: str):
        self.wanted = wanted
        super().__init__(
            path,
            f"cannot travel to {wanted}: {detail}. Pick a version between the oldest kept "
            "log entry and the latest (log retention and VACUUM limit how far back it goes).",
        )


class UnsupportedTableFeatureError(DeltaTableError):
    """The embedded path cannot honour a table feature in use, so it refuses to read or
    write the table."""

    def __init__(self, path: str, features: Sequence[str], *, writing: bool = False):
        self.features = tuple(features)
        verb = "Write" if writing else "Read"
        super().__init__(
            path,
            f"uses {', '.join(self.features)}, which the embedded path cannot "
            f"{verb.lower()}. {verb} it with the native path (delta: native, with Delta's "
            "jars on the Spark session).",
        )


class ConstraintViolationError(DeltaTableError):
    """Rows break the table's NOT NULL columns or CHECK constraints: nothing is written."""

    def __init__(self, path: str, violation: str):
        self.violation = violation
        super().__init__(path, f"{violation}: nothing was written. Fix the rows, or drop the "
                               "constraint (ALTER TABLE ... DROP CONSTRAINT, or ALTER COLUMN ... "
                               "DROP NOT NULL).")


class SchemaMismatchError(DeltaTableError):
    """Data written does not match the table's schema."""

    def __init__(self, path: str, differences: Sequence[str], hint: str):
        self.differences = tuple(differences)
        super().__init__(path, f"schema mismatch: {'; '.join(self.differences)}. {hint}")


class CatalogError(DeltamarkError):
    """A table named by its catalog name that the Spark session's catalog cannot give as
    asked (no such table or database, a view, another format); ``table`` names it."""

    def __init__(self, table: str, message: str):
        self.table = table
        super().__init__(f"table {table}: {message}")


class IcebergError(DeltamarkError):
    """A problem with one Iceberg table (or the Spark line, for Iceberg); ``table`` names
    it. ``missing``: the catalog has no such table."""

    def __init__(self, table: str, message: str, *, missing: bool = False):
        self.table, self.missing = table, missing
        super().__init__(f"Iceberg table {table}: {message}")


class ChangesUnavailableError(DeltaTableError):
    """A table's changes between two versions cannot be read as asked."""


class WriteConflictError(DeltaTableError):
    """The Delta commit was refused (a concurrent writer, or a failed precondition)."""
