"""What each task of an exported Airflow DAG runs (``framework.workflows.export`` copies
this file into the DAG, which must not need deltamark installed where Airflow parses it).

A task decides as ``deltamark workflow run`` does. It runs once every job its triggers
watch has ended (``trigger_rule="all_done"``), reads the deltamark state each of them
pushed to XCom (a task with none was skipped: SKIPPED), and runs its job when one of its
triggers' conditions holds; else it skips itself, saying why. Airflow's trigger rules
cannot do this: they count an ``upstream_failed`` task as failed, where deltamark (like
Glue) counts a job that never ran as SKIPPED. The job runs as ``deltamark run JOB --json``
with its params, the run properties (the workflow's, the DAG run's conf, then what the
jobs that ended before it published, in the order they ended) and the workflow run's id
(the DAG run's). Its state (SUCCEEDED, FAILED, TIMEOUT at its time limit, STOPPED when
killed) and published properties go to XCom under ``deltamark``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import UTC, datetime
from typing import Any

# Set by the exported DAG: the command, working directory, workflow and jobs.
DELTAMARK: list[str] = ["deltamark"]
WORKDIR: str = "."
WORKFLOW: str = ""
RUN_PROPERTIES: dict[str, str] = {}
#: job -> {"run": [job, --script, path], "args", "timeout_minutes", "triggers": [{"name",
#: "logical", "conditions": [[job, state]], "args", "args_from_properties"}]}
JOBS: dict[str, dict[str, Any]] = {}
#: how long a job gets to stop after SIGTERM at its time limit, before SIGKILL
STOP_GRACE_SECONDS = 10


def run_job(job: str, ti: Any = None, dag_run: Any = None) -> None:
    """The task of ``job``: decide, run ``deltamark run``, push its outcome."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    ended = {name: ti.xcom_pull(task_ids=name, key="deltamark") for name in JOBS
             if name != job}
    properties = {**RUN_PROPERTIES, **{k: str(v) for k, v in (dag_run.conf or {}).items()}}
    for outcome in sorted((o for o in ended.values() if o), key=lambda o: o["ended_at"]):
        properties.update(outcome["properties"])
    spec = JOBS[job]
    trigger = _fired(spec["triggers"], {name: (o or {}).get("state", "SKIPPED")
                                        for name, o in ended.items()})
    if trigger is None:
        reasons = [f"{t['name']}: {_describe(t)}" for t in spec["triggers"]]
        raise AirflowSkipException(f"{'; '.join(reasons)} can no longer hold")
    args = {**spec["args"], **trigger["args"],
            **{param: properties[name] for param, name in trigger["args_from_properties"].items()
               if name in properties}}
    command = [*DELTAMARK, "run", *spec["run"], "--json", f"--workflow={WORKFLOW}",
               f"--workflow-run-id={dag_run.run_id}",
               *(f"--arg={k}={v}" for k, v in args.items()),
               *(f"--run-property={k}={v}" for k, v in properties.items())]
    state, report = _run(command, spec["timeout_minutes"], _lineage_parent(ti))
    ti.xcom_push("deltamark", {"state": state, "run_id": report.get("run_id"),
                               "properties": report.get("properties") or {},
                               "ended_at": datetime.now(UTC).isoformat()})
    if state != "SUCCEEDED":
        raise AirflowFailException(f"deltamark run {job}: {state}: "
                                   f"{report.get('error') or 'see the log above'}")


def _fired(triggers: list[dict[str, Any]], states: dict[str, str]) -> dict[str, Any] | None:
    """The first trigger whose conditions hold (the start trigger has none), or None."""
    for trigger in triggers:
        held = [states.get(job, "SKIPPED") == state for job, state in trigger["conditions"]]
        if not held or (all(held) if trigger["logical"] == "all" else any(held)):
            return trigger
    return None


def _describe(trigger: dict[str, Any]) -> str:
    joined = f" {'AND' if trigger['logical'] == 'all' else 'OR'} ".join(
        f"{job} {state}" for job, state in trigger["conditions"])
    return f"({joined})" if len(trigger["conditions"]) > 1 else joined


def _lineage_parent(ti: Any) -> dict[str, str]:
    """With Airflow's OpenLineage provider, the task's run as the OpenLineage parent of
    the job's run (as the provider's macros name it for Spark and dbt jobs)."""
    try:
        from airflow.providers.openlineage.plugins import macros
    except ImportError:
        return {}
    found = {"OPENLINEAGE_PARENT_ID": macros.lineage_parent_id(ti)}
    if hasattr(macros, "lineage_root_parent_id"):
        found["OPENLINEAGE_ROOT_PARENT_ID"] = macros.lineage_root_parent_id(ti)
    return found


def _run(command: list[str], timeout_minutes: float | None,
         env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Run ``deltamark run`` in its own process group within its time limit, with ``env``
    added to the environment: its state and its JSON report (the last line of its
    output)."""
    print("running:", " ".join(command), flush=True)
    process = subprocess.Popen(command, cwd=WORKDIR, stdout=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, **env})
    try:
        out, _ = process.communicate(timeout=timeout_minutes * 60 if timeout_minutes else None)
        code = process.returncode  # a signal: negative, or 128 + N from a deltamark server
        state = "SUCCEEDED" if code == 0 else "FAILED" if 0 < code <= 128 else "STOPPED"
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
            os.killpg(process.pid, sig)
            try:
                out, _ = process.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        state = "TIMEOUT"
    print(out, flush=True)
    for line in reversed(out.strip().splitlines()):
        try:
            return state, json.loads(line)
        except ValueError:
            continue
    return state, {}
