"""Job declarations: ``conf/jobs/<name>.yaml``, validated all at once.

    class: jobs.orders_ingest:OrdersIngest   # from the project directory (conf/'s parent) or
                                             # an installed package; or path/to/file.py:Class
                                             # (relative to conf/)
    bookmark: enable                         # enable | disable | pause
    params: {landing: data/landing/orders, target: data/lake/bronze/orders}
    checks: {...}                            # data-quality rule sets (framework.quality)
    skip_when_nothing_new: true              # false: always run (time-based work)

Params are strings, as Glue job arguments are; ``--arg KEY=VALUE`` overrides them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from framework.config import Settings, read_yaml, scalar_mapping, unknown_keys
from framework.errors import ConfigError, JobError, JobNotFoundError
from framework.run.modes import BookmarkMode

if TYPE_CHECKING:
    from framework.quality import RuleSet
    from framework.run.job import IncrementalJob

__all__ = ["JobSpec", "job_names", "load_job"]

KNOWN_KEYS = ("class", "bookmark", "params", "checks", "description", "skip_when_nothing_new",
              "tombstone_retention_hours")
#: a week, as a file delivered late or a replica's lag are counted in days at most
TOMBSTONE_RETENTION_HOURS = 168


@dataclass(frozen=True)
class JobSpec:
    """A validated job declaration."""

    name: str
    source: Path
    #: imports the job's class: ``job_class``, once a run needs it
    load_class: Callable[[], type[IncrementalJob]]
    #: the file of the job's module (or Glue script), found without running it: the .py
    #: files beside it are the job's code (``preflight.fingerprint``); None: none known
    code_file: Path | None
    bookmark: BookmarkMode = "enable"
    params: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    #: data-quality rule sets by name, for ``ctx.write_delta(..., checks=NAME)``
    checks: Mapping[str, RuleSet] = field(default_factory=dict)
    #: a run that finds nothing new before Spark starts is skipped (``framework.run.preflight``)
    skip_when_nothing_new: bool = True
    #: the modules of the job's code that Spark's Python workers get by value (a module
    #: loaded from a file, or the project's own): ``send_by_value`` before Spark runs it
    by_value: tuple[str, ...] = ()
    #: how long ``write_delta(mode="apply_changes")`` keeps a delete's tombstone, unless a
    #: write says (``tombstone_retention_hours``)
    tombstone_retention: timedelta = timedelta(hours=TOMBSTONE_RETENTION_HOURS)

    @functools.cached_property
    def job_class(self) -> type[IncrementalJob]:
        """The job's class, imported on first use: a run with nothing new never imports
        the job's module, nor the pyspark it imports.

        Raises:
            ConfigError: the module raised as it was imported, or holds no such
                ``IncrementalJob`` subclass.
        """
        return self.load_class()

    def send_by_value(self) -> None:
        """Pickle the job's own modules' functions (a UDF, what a UDF calls) by value for
        Spark's workers, which may run anywhere. Not done as the job is loaded: a run with
        nothing new never imports pyspark."""
        if self.by_value:
            from pyspark import cloudpickle

            for name in self.by_value:
                cloudpickle.register_pickle_by_value(sys.modules[name])


def job_names(settings: Settings) -> list[str]:
    """The jobs declared under ``<conf>/jobs``."""
    return sorted(p.stem for p in (settings.conf_dir / "jobs").glob("*.yaml"))


def load_job(settings: Settings, name: str) -> JobSpec:
    """Read and validate the job ``name``, finding its class's module without running it
    (``JobSpec.job_class`` imports it).

    Raises:
        JobNotFoundError: no such file.
        JobError: a name with '/' (a file in a directory under ``<conf>/jobs``).
        ConfigError: every problem in the file, each naming its key.
    """
    jobs = settings.conf_dir / "jobs"
    path = jobs / f"{name}.yaml"
    if "/" in name and path.is_file() and path.parent.resolve() != jobs.resolve() \
            and path.resolve().is_relative_to(jobs.resolve()):
        raise JobError(name, f"a job is a file directly in {jobs} (one name, no '/'): "
                       f"move {path} there, under a name of its own.")
    if "/" in name or not path.is_file():  # "../deltamark" is conf/deltamark.yaml
        raise JobNotFoundError(name, str(settings.conf_dir), job_names(settings))
    raw = read_yaml(path)
    problems = unknown_keys(raw, KNOWN_KEYS)

    bookmark = raw.get("bookmark", "enable")
    if bookmark not in get_args(BookmarkMode):
        problems.append(f"bookmark: '{bookmark}' is not one of enable, disable, pause")

    skip = raw.get("skip_when_nothing_new", True)
    if not isinstance(skip, bool):
        problems.append(f"skip_when_nothing_new: '{skip}' is not true or false")

    tombstones = raw.get("tombstone_retention_hours", TOMBSTONE_RETENTION_HOURS)
    if isinstance(tombstones, bool) or not isinstance(tombstones, (int, float)) \
            or tombstones <= 0:
        problems.append(f"tombstone_retention_hours: '{tombstones}' is not a positive number "
                        "of hours")
        tombstones = TOMBSTONE_RETENTION_HOURS

    params, param_problems = scalar_mapping(raw.get("params"), "params")
    problems += param_problems

    checks: dict[str, RuleSet] = {}
    if "checks" in raw:
        from framework.quality import parse_checks  # only jobs with rules pay for it

        checks, check_problems = parse_checks(raw["checks"])
        problems += check_problems

    found: _ClassRef | None = None
    if "class" not in raw:
        problems.append("class: missing (module.path:ClassName or file.py:ClassName)")
    else:
        found, problem = _find_class(str(raw["class"]), settings.conf_dir)
        if problem:
            problems.append(f"class: {problem}")

    if problems:
        raise ConfigError(str(path), problems)
    assert found is not None  # else "class" was missing or unusable: a problem
    return JobSpec(name=name, source=path, load_class=functools.partial(found.load, path),
                   code_file=found.file, bookmark=bookmark, params=params,
                   description=str(raw.get("description", "")), checks=checks,
                   skip_when_nothing_new=skip, by_value=found.by_value,
                   tombstone_retention=timedelta(hours=tombstones))


@dataclass(frozen=True)
class _ClassRef:
    """A job's ``class:`` as found, before its module runs: ``module`` (a name to import,
    or a file's path to load), its ``file``, the modules Spark's workers get by value."""

    ref: str
    module: str | Path
    class_name: str
    file: Path | None
    by_value: tuple[str, ...]

    def load(self, conf: Path) -> type[IncrementalJob]:
        """The class (``conf``: the job's file, which errors name).

        Raises:
            ConfigError: as ``JobSpec.job_class``.
        """
        from framework.run.job import IncrementalJob

        where = self.ref.rpartition(":")[0]
        try:
            module = (_load_file(self.module) if isinstance(self.module, Path)
                      else importlib.import_module(self.module))
        except Exception as exc:  # whatever the module raises as it is imported
            raise ConfigError(str(conf), [f"class: cannot import '{where}' "
                                          f"({_raised_where(exc)})"]) from exc
        job_class = getattr(module, self.class_name, None)
        if not (isinstance(job_class, type) and issubclass(job_class, IncrementalJob)):
            raise ConfigError(str(conf), [f"class: '{self.class_name}' in '{where}' is not an "
                                          "IncrementalJob subclass"])
        return job_class


def _find_class(ref: str, conf_dir: Path) -> tuple[_ClassRef | None, str | None]:
    """Where the class ``ref`` names is, without running its module; or a problem. The
    project's own modules (examples such as ``jobs``, which is not installed) and a file's
    travel to Spark's Python workers by value: a worker may run anywhere."""
    where, _, class_name = ref.rpartition(":")
    if not where or not class_name:
        return None, f"'{ref}' is not module.path:ClassName or file.py:ClassName"
    if where.endswith(".py"):
        path = conf_dir / where
        if not path.is_file():
            return None, f"cannot import '{where}' (ImportError: no file {path})"
        # Spark's Python workers cannot import a module loaded from a file
        return _ClassRef(ref, path, class_name, path, (_file_module(path),)), None
    project = conf_dir.absolute().parent
    if str(project) not in sys.path:
        sys.path.append(str(project))
    try:  # imports the module's parent packages, not the module
        spec = importlib.util.find_spec(where)
        if spec is None:
            raise ModuleNotFoundError(f"No module named '{where}'")
    except Exception as exc:  # noqa: BLE001 - whatever a parent package raises
        looked = (f"; modules are looked for in {project} (the conf dir's parent) and the "
                  "installed packages" if isinstance(exc, ModuleNotFoundError) else "")
        return None, f"cannot import '{where}' ({_raised_where(exc)}{looked})"
    file = Path(spec.origin) if spec.has_location and spec.origin else None
    own = file is not None and file.absolute().is_relative_to(project)
    return _ClassRef(ref, where, class_name, file,
                     (where.partition(".")[0],) if own else ()), None  # and modules beside it


def _raised_where(exc: Exception) -> str:
    """``Type: message (file:line)``, on one line: the line that raised it."""
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{message} at {frames[-1].filename}:{frames[-1].lineno}" if frames and not \
        isinstance(exc, (ImportError, SyntaxError)) else message


def _file_module(path: Path) -> str:
    return f"deltamark_jobs.{path.stem}"


def _load_file(path: Path) -> Any:
    """The module of the file ``path``, run anew (a kept server's next run sees an edit)."""
    name = _file_module(path)
    spec = importlib.util.spec_from_file_location(name, path)
    # a .py file (what callers pass) always gets a spec with a source loader
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
