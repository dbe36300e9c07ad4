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

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from framework.config import Settings, read_yaml, scalar_mapping, unknown_keys
from framework.errors import ConfigError, JobError, JobNotFoundError
from framework.modes import BookmarkMode

if TYPE_CHECKING:
    from framework.job import IncrementalJob
    from framework.quality import RuleSet

__all__ = ["JobSpec", "job_names", "load_job"]

KNOWN_KEYS = ("class", "bookmark", "params", "checks", "description", "skip_when_nothing_new")


@dataclass(frozen=True)
class JobSpec:
    """A validated job declaration."""

    name: str
    source: Path
    job_class: type[IncrementalJob]
    bookmark: BookmarkMode = "enable"
    params: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    #: data-quality rule sets by name, for ``ctx.write_delta(..., checks=NAME)``
    checks: Mapping[str, RuleSet] = field(default_factory=dict)
    #: a run that finds nothing new before Spark starts is skipped (``framework.preflight``)
    skip_when_nothing_new: bool = True


def job_names(settings: Settings) -> list[str]:
    """The jobs declared under ``<conf>/jobs``."""
    return sorted(p.stem for p in (settings.conf_dir / "jobs").glob("*.yaml"))


def load_job(settings: Settings, name: str) -> JobSpec:
    """Read, validate and import the job ``name``.

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

    params, param_problems = scalar_mapping(raw.get("params"), "params")
    problems += param_problems

    checks: dict[str, RuleSet] = {}
    if "checks" in raw:
        from framework.quality import parse_checks  # only jobs with rules pay for it

        checks, check_problems = parse_checks(raw["checks"])
        problems += check_problems

    job_class: type[IncrementalJob] | None = None
    if "class" not in raw:
        problems.append("class: missing (module.path:ClassName or file.py:ClassName)")
    else:
        job_class, problem = _import_class(str(raw["class"]), settings.conf_dir)
        if problem:
            problems.append(f"class: {problem}")

    if problems:
        raise ConfigError(str(path), problems)
    assert job_class is not None  # else "class" was missing or unusable: a problem
    return JobSpec(name=name, source=path, job_class=job_class, bookmark=bookmark,
                   params=params, description=str(raw.get("description", "")),
                   checks=checks, skip_when_nothing_new=skip)


def _import_class(ref: str, conf_dir: Path) -> tuple[type[IncrementalJob] | None, str | None]:
    from framework.job import IncrementalJob

    where, _, class_name = ref.rpartition(":")
    if not where or not class_name:
        return None, f"'{ref}' is not module.path:ClassName or file.py:ClassName"
    project = conf_dir.absolute().parent
    try:
        module = _load_file(conf_dir / where) if where.endswith(".py") else (
            _import_module(where, project=project))
    except Exception as exc:  # noqa: BLE001 - whatever the module raises as it is imported
        looked = (f"; modules are looked for in {project} (the conf dir's parent) and the "
                  "installed packages" if isinstance(exc, ModuleNotFoundError)
                  and not where.endswith(".py") else "")
        return None, f"cannot import '{where}' ({_raised_where(exc)}{looked})"
    job_class = getattr(module, class_name, None)
    if not (isinstance(job_class, type) and issubclass(job_class, IncrementalJob)):
        return None, f"'{class_name}' in '{where}' is not an IncrementalJob subclass"
    return job_class, None


def _raised_where(exc: Exception) -> str:
    """``Type: message (file:line)``, on one line: the line that raised it."""
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{message} at {frames[-1].filename}:{frames[-1].lineno}" if frames and not \
        isinstance(exc, (ImportError, SyntaxError)) else message


def _import_module(name: str, *, project: Path) -> Any:
    """The module ``name``, from the project directory or an installed package. The
    project's own modules (examples such as ``jobs``, which is not installed) travel to
    Spark's Python workers by value, as a file's do: a worker may run anywhere."""
    if str(project) not in sys.path:
        sys.path.append(str(project))
    module = importlib.import_module(name)
    if module.__file__ and Path(module.__file__).absolute().is_relative_to(project):
        _send_by_value(sys.modules[name.partition(".")[0]])  # and the modules beside it
    return module


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise ImportError(f"no file {path}")
    name = f"deltamark_jobs.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    # a .py file (what callers pass) always gets a spec with a source loader
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # Spark's Python workers cannot import a module loaded from a file
    _send_by_value(module)
    return module


def _send_by_value(module: Any) -> None:
    """Pickle ``module``'s functions (a UDF, what a UDF calls) by value for Spark's workers."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
