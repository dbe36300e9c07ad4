"""OpenLineage run events for deltamark's job and workflow runs, through the
``openlineage-python`` client (``deltamark[lineage]``), configured as that client is:
``OPENLINEAGE_URL`` (and ``OPENLINEAGE_API_KEY``), an ``openlineage.yml`` (in the working
directory, ``~/.openlineage/`` or ``OPENLINEAGE_CONFIG``) or ``OPENLINEAGE__TRANSPORT__*``
variables; HTTP, file, console or any other transport it has. Off unless configured
(and with ``OPENLINEAGE_DISABLED=true``).

A run emits START once it is recorded running, and COMPLETE or FAIL when it ends; a run
that recovery finds interrupted and aborts gets ABORT. A run that found nothing new
(skipped before Spark starts) emits nothing: it read and wrote nothing. Jobs are named
in ``OPENLINEAGE_NAMESPACE`` (else ``lineage.namespace`` in conf/deltamark.yaml, else
``deltamark``); datasets as the OpenLineage naming conventions say (``file`` + path,
``s3://bucket`` + key, ``postgres://host:port`` + ``db.schema.table``).

A run's parent is the run that started it: a deltamark workflow run hands itself to its
jobs, and anything else can, as Airflow's OpenLineage provider and ``dbt-ol`` do, with
``OPENLINEAGE_PARENT_ID`` (``namespace/job/run_id``), ``OPENLINEAGE_ROOT_PARENT_ID`` or
``OPENLINEAGE_CONTEXT`` (JSON). Spark's OpenLineage listener, on a session deltamark
starts for a run, gets that run as its parent.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from framework import storage
from framework.common import humanize
from framework.common.version import __version__
from framework.config import Settings
from framework.errors import one_line
from framework.sinks import written
from state_tables.model import DqResult, Run

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from pyspark.sql.types import StructType

    from framework.jdbc import Connection

__all__ = ["FACETS_SCHEMA", "Dataset", "Lineage", "Parent", "RunDatasets", "RunEvents",
           "RunRef", "parent_env"]

log = logging.getLogger("deltamark.lineage")

PRODUCER = f"https://pypi.org/project/deltamark/{__version__}/"
#: the JSON schema of deltamark's own facets (shipped in the package)
FACETS_SCHEMA = Path(__file__).with_name("lineage_facets.json")
FACETS_SCHEMA_URL = "https://pypi.org/project/deltamark/lineage_facets.json"
DEFAULT_NAMESPACE = "deltamark"
#: the port a database listens on when its JDBC URL names none
DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306, "mariadb": 3306, "sqlserver": 1433,
                 "oracle": 1521}
#: an event's state for each run status it is emitted for
EVENT_TYPES = {"running": "START", "succeeded": "COMPLETE", "failed": "FAIL",
               "aborted": "ABORT"}


@dataclass(frozen=True)
class RunRef:
    """A run as OpenLineage names it: its job's namespace and name, and a UUID."""

    namespace: str
    name: str
    run_id: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.run_id}"

    @classmethod
    def parse(cls, text: str) -> RunRef | None:
        """``namespace/job/run_id`` (the job's name may hold ``/``); None if malformed."""
        namespace, _, rest = text.partition("/")
        name, _, run_id = rest.rpartition("/")
        return cls(namespace, name, run_id) if namespace and name and _is_uuid(run_id) else None


@dataclass(frozen=True)
class Parent:
    """The run that started a run, and the root of its tree (itself when it has none)."""

    run: RunRef
    root: RunRef

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Parent | None:
        """The parent named by ``OPENLINEAGE_CONTEXT``, else ``OPENLINEAGE_PARENT_ID`` (and
        ``OPENLINEAGE_ROOT_PARENT_ID``); None when neither names one (a malformed value
        is logged and ignored, as ``dbt-ol`` does)."""
        environ = os.environ if environ is None else environ
        if raw := environ.get("OPENLINEAGE_CONTEXT"):
            try:
                parent = json.loads(raw)["parent"]
                run = RunRef(parent["job"]["namespace"], parent["job"]["name"],
                             parent["run"]["runId"])
                root = parent.get("root") or {}
                return cls(run, RunRef(root["job"]["namespace"], root["job"]["name"],
                                       root["run"]["runId"]) if root else run)
            except (ValueError, KeyError, TypeError):
                log.warning("OPENLINEAGE_CONTEXT is not {\"parent\": {\"run\": {\"runId\": "
                            "...}, \"job\": {\"namespace\": ..., \"name\": ...}}}: ignored")
        if raw := environ.get("OPENLINEAGE_PARENT_ID"):
            named = RunRef.parse(raw)
            if named is None:
                log.warning("OPENLINEAGE_PARENT_ID %r is not namespace/job/run_id (a UUID): "
                            "ignored", raw)
                return None
            return cls(named,
                       RunRef.parse(environ.get("OPENLINEAGE_ROOT_PARENT_ID", "")) or named)
        return None


def parent_env(parent: Parent) -> dict[str, str]:
    """The variables that name ``parent`` to a process it starts (``Parent.from_env``)."""
    return {"OPENLINEAGE_PARENT_ID": str(parent.run),
            "OPENLINEAGE_ROOT_PARENT_ID": str(parent.root),
            "OPENLINEAGE_CONTEXT": json.dumps({"parent": {
                "run": {"runId": parent.run.run_id},
                "job": {"namespace": parent.run.namespace, "name": parent.run.name},
                "root": {"run": {"runId": parent.root.run_id},
                         "job": {"namespace": parent.root.namespace,
                                 "name": parent.root.name}}}})}


def run_uuid(run_id: str) -> str:
    """A deltamark run id (32 hex digits) as the UUID OpenLineage wants."""
    return str(uuid.UUID(hex=run_id))


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


# --- datasets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A dataset as OpenLineage names it, and its columns as (name, type) when known."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def at_path(cls, path: str, schema: StructType | None = None) -> Dataset:
        """Files or a table at ``path``: ``s3://bucket`` + key, else ``file`` + absolute
        path (``s3a://`` is S3's)."""
        if not storage.is_local(path):
            parsed = urlparse(path)
            scheme = "s3" if parsed.scheme in ("s3", "s3a", "s3n") else parsed.scheme
            return cls(f"{scheme}://{parsed.netloc}", parsed.path.strip("/") or "/",
                       _fields(schema))
        return cls("file", storage.local_path(path), _fields(schema))

    @classmethod
    def in_catalog(cls, table: str, schema: StructType | None = None) -> Dataset:
        """An Iceberg table as Spark names it: ``iceberg://<catalog>`` + the
        ``namespace.table`` in it."""
        catalog, _, name = table.partition(".")
        return cls(f"iceberg://{catalog}", name, _fields(schema))

    @classmethod
    def in_database(cls, connection: Connection, table: str,
                    schema: StructType | None = None) -> Dataset:
        """A database table: ``postgres://host:port`` + ``database.schema.table`` (the
        schema ``public`` when the name has none), ``mysql://host:port`` +
        ``database.table``, others as their JDBC URL names the server; SQLite: ``sqlite``
        + the file's path and the table."""
        dialect = connection.dialect
        if dialect == "sqlite":
            where = connection.url.removeprefix("jdbc:sqlite:")
            return cls("sqlite", f"{Path(where).absolute()}.{table}", _fields(schema))
        parsed = urlparse(connection.url.removeprefix("jdbc:"))
        scheme = {"postgresql": "postgres"}.get(dialect, dialect)
        port = parsed.port or DEFAULT_PORTS.get(scheme)
        server = f"{scheme}://{parsed.hostname}" + (f":{port}" if port else "")
        database = parsed.path.strip("/")
        if scheme == "postgres" and "." not in table:
            table = f"public.{table}"
        return cls(server, f"{database}.{table}" if database else table, _fields(schema))

    def with_schema(self, schema: StructType | None) -> Dataset:
        return Dataset(self.namespace, self.name, _fields(schema))


def _fields(schema: StructType | None) -> tuple[tuple[str, str], ...]:
    return () if schema is None else tuple((f.name, f.dataType.simpleString())
                                           for f in schema.fields)


@dataclass
class RunDatasets:
    """What a run read (by context) and wrote (by target), as datasets, with the
    bookmark state each context started from."""

    inputs: dict[str, list[Dataset]] = field(default_factory=dict)
    outputs: dict[str, Dataset] = field(default_factory=dict)
    #: context -> (its source kind, the bookmark state it started from as stored; None)
    started: dict[str, tuple[str, Mapping[str, Any] | None]] = field(default_factory=dict)
    #: context -> its bookmark state once the run commits, as stored (None: none)
    states: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)


# --- events -----------------------------------------------------------------------------


class Lineage:
    """Sends the events of one process's runs (``Lineage.configured``)."""

    def __init__(self, client: OpenLineageClient, namespace: str):
        self.client, self.namespace = client, namespace

    @classmethod
    def configured(cls, settings: Settings,
                   environ: Mapping[str, str] | None = None) -> Lineage | None:
        """The events' sender when OpenLineage is configured here, else None. Configured
        without ``openlineage-python`` installed: one warning, and no events."""
        environ = os.environ if environ is None else environ
        if not _configured(environ):
            return None
        try:
            from openlineage.client import OpenLineageClient
        except ImportError:
            log.warning("OpenLineage is configured here but openlineage-python is not "
                        "installed (pip install 'deltamark[lineage]'): no lineage events")
            return None
        namespace = (environ.get("OPENLINEAGE_NAMESPACE") or settings.lineage_namespace
                     or DEFAULT_NAMESPACE)
        return cls(OpenLineageClient(), namespace)

    def spark_conf(self, job: str, run_id: str, parent: Parent | None) -> dict[str, str]:
        """The settings that give Spark's OpenLineage listener the run as its parent."""
        run = RunRef(self.namespace, job, run_uuid(run_id))
        root = parent.root if parent else run
        return {"spark.openlineage.parentJobNamespace": run.namespace,
                "spark.openlineage.parentJobName": run.name,
                "spark.openlineage.parentRunId": run.run_id,
                "spark.openlineage.rootParentJobNamespace": root.namespace,
                "spark.openlineage.rootParentJobName": root.name,
                "spark.openlineage.rootParentRunId": root.run_id}

    def job_run(self, run: Run, *, parent: Parent | None,
                datasets: RunDatasets | None = None,
                quality: Sequence[DqResult] = ()) -> None:
        """The event for ``run`` in its status (``EVENT_TYPES``; none for others): what
        it read and wrote (``datasets``), with the rule outcomes of each target."""
        if run.status not in EVENT_TYPES:
            return
        from openlineage.client.facet_v2 import error_message_run

        facets: dict[str, Any] = {"deltamark_run": _facet(
            "DeltamarkRunFacet", run_seq=run.run_seq, attempt=run.attempt, mode=run.mode,
            deltamark_run_id=run.run_id, recovery=run.recovery,
            properties=dict(run.properties))}
        if run.status == "failed" and run.error:
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=run.error, programmingLanguage="python")
        inputs, outputs = ([], []) if datasets is None else (
            self._inputs(run, datasets), self._outputs(run, datasets, quality))
        self._emit(EVENT_TYPES[run.status], run.job, run.run_id, "JOB",
                   run.ended_at or run.started_at, parent, facets, inputs, outputs)

    def workflow_run(self, workflow: str, run_id: str, state: Literal[
            "START", "COMPLETE", "FAIL"], *, parent: Parent | None) -> None:
        """The event of a deltamark workflow run (its jobs' runs are its children)."""
        self._emit(state, workflow, run_id, "WORKFLOW", datetime.now(UTC), parent, {}, [], [])

    def child(self, workflow: str, run_id: str, parent: Parent | None) -> Parent:
        """The parent a workflow run gives the jobs it starts."""
        run = RunRef(self.namespace, workflow, run_uuid(run_id))
        return Parent(run, parent.root if parent else run)

    def _inputs(self, run: Run, datasets: RunDatasets) -> list[Any]:
        from openlineage.client.event_v2 import InputDataset
        from openlineage.client.facet_v2 import input_statistics_input_dataset as stats

        found = []
        for context, read in datasets.inputs.items():
            counts = run.inputs.get(context, {})
            kind, started = datasets.started.get(context, ("", None))
            bookmark = _facet("DeltamarkBookmarkInputDatasetFacet", context=context,
                              kind=kind, read=humanize.read(counts) if counts else "",
                              counts=dict(counts), started_from=started,
                              committed=datasets.states.get(context))
            for dataset in read:
                found.append(InputDataset(
                    dataset.namespace, dataset.name, facets=_schema(dataset),
                    inputFacets={
                        "inputStatistics": stats.InputStatisticsInputDatasetFacet(
                            rowCount=counts.get("rows"), size=counts.get("bytes"),
                            fileCount=counts.get("files")),
                        "deltamark_bookmark": bookmark} if len(read) == 1 else
                    {"deltamark_bookmark": bookmark}))
        return found

    def _outputs(self, run: Run, datasets: RunDatasets,
                 quality: Sequence[DqResult]) -> list[Any]:
        from openlineage.client.event_v2 import OutputDataset
        from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq
        from openlineage.client.facet_v2 import output_statistics_output_dataset as stats

        found = []
        for target, dataset in datasets.outputs.items():
            facets: dict[str, Any] = _schema(dataset)
            checked = [r for r in quality if r.target == target]
            if checked:
                facets["dataQualityAssertions"] = dq.DataQualityAssertionsDatasetFacet(
                    assertions=[dq.Assertion(
                        assertion=r.kind, success=r.outcome == "passed", name=r.rule,
                        severity="warn" if r.policy == "warn" else "error",
                        actual=None if r.observed is None else str(r.observed))
                        for r in checked])
            figures = written(target, run.outputs.get(target, {}))
            found.append(OutputDataset(
                dataset.namespace, dataset.name, facets=facets,
                outputFacets={} if figures is None else {
                    "outputStatistics": stats.OutputStatisticsOutputDatasetFacet(
                        rowCount=figures.rows, size=figures.bytes,
                        fileCount=figures.files)}))
        return found

    def _emit(self, state: str, job: str, run_id: str, job_type: str, when: datetime,
              parent: Parent | None, facets: dict[str, Any], inputs: list[Any],
              outputs: list[Any]) -> None:
        from openlineage.client import __version__ as client_version
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import job_type_job, parent_run, processing_engine_run

        facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
            version=__version__, name="deltamark", openlineageAdapterVersion=client_version)
        if parent is not None:
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=parent.run.run_id),
                job=parent_run.Job(namespace=parent.run.namespace, name=parent.run.name),
                root=parent_run.Root(
                    run=parent_run.RootRun(runId=parent.root.run_id),
                    job=parent_run.RootJob(namespace=parent.root.namespace,
                                           name=parent.root.name)))
        event = RunEvent(
            eventType=RunState[state], eventTime=when.isoformat(), producer=PRODUCER,
            run=Run(runId=run_uuid(run_id), facets=facets),
            job=Job(namespace=self.namespace, name=job, facets={
                "jobType": job_type_job.JobTypeJobFacet(
                    processingType="BATCH", integration="DELTAMARK", jobType=job_type)}),
            inputs=inputs, outputs=outputs)
        try:
            self.client.emit(event)
        except Exception as exc:  # noqa: BLE001 - lineage never fails a run: said, not raised
            log.warning("the OpenLineage %s event of %s was not sent: %s", state, job,
                        one_line(exc))


@dataclass(frozen=True)
class RunEvents:
    """Where a job run's events go (nowhere when lineage is off), and its parent."""

    sender: Lineage | None = None
    parent: Parent | None = None

    @classmethod
    def configured(cls, settings: Settings) -> RunEvents:
        """This process's: ``Lineage.configured``, the parent from the environment."""
        sender = Lineage.configured(settings)
        return cls(sender, Parent.from_env() if sender else None)

    @property
    def enabled(self) -> bool:
        return self.sender is not None

    def emit(self, run: Run, datasets: RunDatasets | None = None,
             quality: Sequence[DqResult] = ()) -> None:
        """``Lineage.job_run``, when lineage is on."""
        if self.sender is not None:
            self.sender.job_run(run, parent=self.parent, datasets=datasets, quality=quality)

    def spark_conf(self, job: str, run_id: str) -> dict[str, str]:
        """``Lineage.spark_conf`` ({} when lineage is off)."""
        return {} if self.sender is None else self.sender.spark_conf(job, run_id, self.parent)


def _configured(environ: Mapping[str, str]) -> bool:
    """Whether the OpenLineage client finds a configuration here (where it looks)."""
    if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OPENLINEAGE_URL") or any(k.startswith("OPENLINEAGE__TRANSPORT")
                                             for k in environ):
        return True
    files = [environ.get("OPENLINEAGE_CONFIG"), Path.cwd() / "openlineage.yml",
             Path.home() / ".openlineage" / "openlineage.yml"]
    return any(f and Path(f).is_file() for f in files)


def _schema(dataset: Dataset) -> dict[str, Any]:
    if not dataset.fields:
        return {}
    from openlineage.client.facet_v2 import schema_dataset

    return {"schema": schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=name, type=kind)
        for name, kind in dataset.fields])}


def _facet(name: str, **values: Any) -> Any:
    """One of deltamark's own facets (``FACETS_SCHEMA``), as the client sends facets."""
    from openlineage.client.facet_v2 import BaseFacet

    facet = BaseFacet(producer=PRODUCER).with_additional_properties(**values)
    facet._schemaURL = f"{FACETS_SCHEMA_URL}#/$defs/{name}"
    return facet
