"""Plain Parquet targets (and the other file formats Glue scripts write: JSON, CSV, ORC,
Avro, XML, text), written exactly once per run.

A directory of files has no transaction log, so deltamark keeps one beside the data, in
``_deltamark/`` (Spark, Hive and Athena skip names starting with ``_``):

1. Spark writes the run's rows to ``_deltamark/staging/<tag><attempt>/``;
2. each file is moved into the target (its partition directory kept), named
   ``<tag><Spark's name>``, where the tag is ``dm-<job hash>-<run_seq>-``;
3. the manifest ``_deltamark/commits/<tag>.json`` (job, run, files, rows) is written
   atomically. It is the commit point: the run has landed in the target once it exists.

A run that stops before its manifest leaves tagged files that no manifest lists; recovery
(abort or replay) and the next attempt of the same run delete them, so a reader that
lists the directory after recovery sees each row exactly once. Until then, or while the
files are moved (milliseconds), a reader may see part of a run: use a Delta target where
readers must never see that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from framework.common.faults import crash_point
from framework.sinks.target import PrunedTarget, TargetRun, Written
from framework.spark.lines import require
from framework.storage import filesystem
from state_tables.model import RunOutput, RunRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["OUTPUT_TAG", "ParquetCommit", "ParquetTarget", "commits", "committed", "discard",
           "is_output", "remove_runs_after", "write"]

LOG_DIR = "_deltamark"
#: what marks a Parquet target among a run's outputs (``Run.outputs``); Delta has no tag
OUTPUT_TAG: RunOutput = {"format": "parquet"}
_FORMAT_NAMES = {"parquet": "Parquet", "json": "JSON", "csv": "CSV", "orc": "ORC",
                 "avro": "Avro", "xml": "XML"}


@dataclass(frozen=True)
class ParquetCommit:
    """A run's files in a Parquet target (paths relative to it), from its manifest."""

    job: str
    run_id: str
    run_seq: int
    files: tuple[str, ...]
    rows: int
    committed_at: datetime
    replayed: bool = False
    #: what the run commits to the state (``target_runs.run_record``)
    record: RunRecord = dataclasses.field(default_factory=RunRecord)


def write(df: DataFrame, target: str, *, job: str, run_id: str, run_seq: int, attempt: int,
          partition_by: Sequence[str] = (), record: RunRecord | None = None,
          before_commit: Callable[[], object] = lambda: None, file_format: str = "parquet",
          options: Mapping[str, str] | None = None) -> ParquetCommit:
    """Write ``df`` to ``target`` as run ``run_seq``'s files (``file_format``, with Spark's
    writer ``options``); a run that already landed there is not written again (its commit
    is returned, ``replayed``). ``before_commit`` is called once the files are staged,
    before any is moved into ``target``; ``record`` goes into the manifest."""
    if file_format == "xml":
        require("XML files", since="4.0")
    discard(target, job, run_seq)  # what an earlier attempt left, if it stopped midway
    fs, base, to_uri = filesystem(target)
    if (done := _manifest(fs, base, job, run_seq)) is not None:
        return dataclasses.replace(done, replayed=True)
    tag = _tag(job, run_seq)
    staging = posixpath.join(base, LOG_DIR, "staging", f"{tag}{attempt}")
    try:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        counted = Observation("deltamark_rows")
        df.observe(counted, F.count(F.lit(1)).alias("rows")).write.mode("overwrite") \
            .partitionBy(*partition_by).format(file_format).options(**(options or {})) \
            .save(to_uri(staging))
        before_commit()
        files = _move(fs, staging, base, tag)
        rows = counted.get["rows"]
        commit = ParquetCommit(job=job, run_id=run_id, run_seq=run_seq, files=files, rows=rows,
                               record=record.copy() if record else RunRecord(),
                               committed_at=datetime.now(UTC))
        _write_manifest(fs, base, commit)
    except BaseException:
        discard(target, job, run_seq)
        raise
    fs.delete_dir(staging)
    return commit


@dataclass(frozen=True)
class ParquetTarget:
    """A directory of files written by runs (``Target``): a run landed once its manifest
    is written."""

    key: str

    def describe(self, output: RunOutput) -> str:
        kind = output.get("file_format", "parquet")
        return f"{output['files']} {_FORMAT_NAMES.get(kind, kind)} files, {output['rows']} rows"

    def written(self, output: RunOutput) -> Written:
        return Written(rows=output.get("rows"), files=output.get("files"))

    def runs(self, job: str, *, after_seq: int = 0) -> list[TargetRun]:
        return [TargetRun(self.key, c.run_seq, c.run_id, c.committed_at, None, c.record,
                          {**OUTPUT_TAG, "written": True})
                for c in sorted(commits(self.key, job), key=lambda c: c.run_seq)
                if c.run_seq > after_seq]

    def landed(self, job: str, run_seq: int) -> bool:
        return committed(self.key, job, run_seq) is not None

    def discard(self, job: str, run_seq: int) -> None:
        discard(self.key, job, run_seq)

    def roll_back(self, job: str, run_seq: int, run_id: str) -> bool:
        remove_runs_after(self.key, job, run_seq - 1)
        return True

    def restore_blockers(self, job: str, run_seq: int) -> list[str]:
        return []  # only the job's own files are removed

    def restore(self, job: str, run_seq: int, run_id: str) -> PrunedTarget | None:
        removed = remove_runs_after(self.key, job, run_seq)
        return PrunedTarget(self.key, tuple(c.run_seq for c in removed),
                            sum(len(c.files) for c in removed)) if removed else None


def is_output(output: RunOutput) -> bool:
    """Whether a run's output entry (``Run.outputs[target]``) is a Parquet target."""
    return output.get("format") == OUTPUT_TAG["format"]


def committed(target: str, job: str, run_seq: int) -> ParquetCommit | None:
    """Run ``run_seq``'s commit in ``target``, or None if it has not landed there."""
    fs, base, _ = filesystem(target)
    return _manifest(fs, base, job, run_seq)


def commits(target: str, job: str) -> list[ParquetCommit]:
    """Every run of ``job`` that landed in ``target`` (none when it is no target)."""
    fs, base, _ = filesystem(target)
    return _manifests(fs, base, job)


def discard(target: str, job: str, run_seq: int) -> int:
    """Delete what an unfinished run ``run_seq`` left in ``target`` (files no manifest
    lists, its staging); returns how many data files were deleted. A landed run is kept.

    Files are moved out of a staging directory that is removed only after the manifest
    is written, and here only after the files: without a staging directory of the run
    there is nothing to delete, and the target is not listed.
    """
    fs, base, _ = filesystem(target)
    tag = _tag(job, run_seq)
    staged = [f.path for f in _listing(fs, posixpath.join(base, LOG_DIR, "staging"),
                                       recursive=False)
              if posixpath.basename(f.path).startswith(tag)]
    if not staged:
        return 0
    landed = _manifest(fs, base, job, run_seq) is not None  # then staging is all that's left
    leftovers = [] if landed else [
        f for f in _data_files(fs, base) if posixpath.basename(f).startswith(tag)]
    for leftover in leftovers:
        fs.delete_file(leftover)
    for directory in staged:
        fs.delete_dir(directory)
    return len(leftovers)


def remove_runs_after(target: str, job: str, run_seq: int) -> list[ParquetCommit]:
    """Delete the files of ``job``'s runs after ``run_seq`` (a rewind restoring its
    targets), newest first, each with its manifest last; returns what was removed."""
    fs, base, _ = filesystem(target)
    later = sorted((c for c in _manifests(fs, base, job) if c.run_seq > run_seq),
                   key=lambda c: -c.run_seq)
    for commit in later:
        for name in commit.files:
            path = posixpath.join(base, name)
            if fs.get_file_info(path).type == pafs.FileType.File:
                fs.delete_file(path)
        fs.delete_file(_manifest_path(base, job, commit.run_seq))
    return later


def _job_prefix(job: str) -> str:
    return f"dm-{hashlib.sha256(job.encode()).hexdigest()[:12]}-"


def _tag(job: str, run_seq: int) -> str:
    """The prefix of a run's file names: fixed widths, so no run's tag starts another's."""
    return f"{_job_prefix(job)}{run_seq:010d}-"


def _manifest_path(base: str, job: str, run_seq: int) -> str:
    return posixpath.join(base, LOG_DIR, "commits", f"{_tag(job, run_seq)[:-1]}.json")


def _manifest(fs: pafs.FileSystem, base: str, job: str, run_seq: int) -> ParquetCommit | None:
    path = _manifest_path(base, job, run_seq)
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return _read_manifest(fs, path)


def _manifests(fs: pafs.FileSystem, base: str, job: str) -> list[ParquetCommit]:
    prefix = _job_prefix(job)
    return [_read_manifest(fs, f.path)
            for f in _listing(fs, posixpath.join(base, LOG_DIR, "commits"), recursive=False)
            if posixpath.basename(f.path).startswith(prefix) and f.path.endswith(".json")]


def _read_manifest(fs: pafs.FileSystem, path: str) -> ParquetCommit:
    with fs.open_input_stream(path) as stream:
        found = json.loads(stream.read())
    return ParquetCommit(job=found["job"], run_id=found["run_id"], run_seq=found["run_seq"],
                         files=tuple(found["files"]), rows=found["rows"],
                         record=found.get("record", {}),
                         committed_at=datetime.fromisoformat(found["committed_at"]))


def _write_manifest(fs: pafs.FileSystem, base: str, commit: ParquetCommit) -> None:
    """Written aside, then moved into place: it appears whole or not at all."""
    path = _manifest_path(base, commit.job, commit.run_seq)
    fs.create_dir(posixpath.dirname(path))
    aside = f"{path}.{uuid.uuid4().hex}.tmp"
    body = {"job": commit.job, "run_id": commit.run_id, "run_seq": commit.run_seq,
            "files": list(commit.files), "rows": commit.rows,
            "committed_at": commit.committed_at.isoformat(), "record": dict(commit.record)}
    with fs.open_output_stream(aside) as out:
        out.write(json.dumps(body, indent=1, default=str).encode())
    fs.move(aside, path)


def _move(fs: pafs.FileSystem, staging: str, base: str, tag: str) -> tuple[str, ...]:
    """Move the staged data files into the target; files without rows are dropped."""
    moved = []
    for staged in _data_files(fs, staging):
        relative = staged[len(staging):].lstrip("/")
        if not _has_rows(fs, staged):
            continue
        folder, name = posixpath.split(relative)
        destination = posixpath.join(folder, f"{tag}{name}")
        fs.create_dir(posixpath.join(base, folder))
        fs.move(staged, posixpath.join(base, destination))
        crash_point("parquet_moved")
        moved.append(destination)
    return tuple(sorted(moved))


def _has_rows(fs: pafs.FileSystem, path: str) -> bool:
    if not path.endswith(".parquet"):
        return fs.get_file_info(path).size > 0
    with fs.open_input_file(path) as source:
        return pq.ParquetFile(source).metadata.num_rows > 0


def _data_files(fs: pafs.FileSystem, root: str) -> list[str]:
    """The data files under ``root``, outside hidden names (``_deltamark``, ``_SUCCESS``,
    ``.crc``)."""
    found = []
    for info in _listing(fs, root, recursive=True):
        relative = info.path[len(root):].lstrip("/")
        hidden = any(p.startswith(("_", ".")) for p in relative.split("/"))
        if info.type == pafs.FileType.File and not hidden:
            found.append(info.path)
    return found


def _listing(fs: pafs.FileSystem, root: str, *, recursive: bool) -> list[pafs.FileInfo]:
    return fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=recursive))
