"""What a workflow run shares with other processes: its slot and its stop request.

- **Slots** (Glue's MaxConcurrentRuns): a workflow run holds one of its workflow's
  ``max_concurrent_runs`` leases (``<state_root>/_leases/workflows/<name>.<slot>.lock``,
  the job lease of ``framework.storage.lease``) for as long as it runs, so a run beyond the limit
  is refused, and a run whose process died frees its slot as a dead job's lease does.
- **Stop requests** (Glue's StopWorkflowRun): ``deltamark workflow stop RUN_ID`` leaves a
  file (``<state_root>/_workflow_stops/<run_id>``) that the run's process looks for every
  ``POLL_SECONDS``; it then stops its running jobs and starts no more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from framework import storage
from framework.config import Settings
from framework.errors import ConcurrentRunError, WorkflowError
from framework.storage.lease import job_lease, lease_holder
from framework.workflows.definition import Workflow

__all__ = ["POLL_SECONDS", "clear_stop", "live_runs", "request_stop", "run_slot",
           "stop_requested"]

#: how often a workflow run looks for a stop request
POLL_SECONDS = 1.0


@contextlib.contextmanager
def run_slot(settings: Settings, workflow: Workflow, workflow_run_id: str) -> Iterator[None]:
    """Hold one of ``workflow``'s run slots while the block runs.

    Raises:
        WorkflowError: all ``max_concurrent_runs`` slots are held; names their runs.
    """
    with contextlib.ExitStack() as held:
        for slot in range(workflow.max_concurrent_runs):
            with contextlib.suppress(ConcurrentRunError):
                held.enter_context(job_lease(settings.state_root, _slot(workflow.name, slot),
                                             workflow_run_id))
                break
        else:
            running = ", ".join(sorted(live_runs(settings, workflow)))
            raise WorkflowError(workflow.name, f"{workflow.max_concurrent_runs} run(s) in "
                                f"progress ({running}), its max_concurrent_runs; wait for one "
                                "to end or stop it (deltamark workflow stop RUN_ID)")
        yield


def live_runs(settings: Settings, workflow: Workflow) -> set[str]:
    """The ids of ``workflow``'s runs whose process holds a slot now."""
    holders = (lease_holder(settings.state_root, _slot(workflow.name, slot))
               for slot in range(workflow.max_concurrent_runs))
    return {h["run_id"] for h in holders if h and "run_id" in h}


def request_stop(settings: Settings, workflow_run_id: str) -> None:
    """Ask the workflow run's process to stop it."""
    storage.write_bytes(_stop_file(settings, workflow_run_id), b"stop\n")


def stop_requested(settings: Settings, workflow_run_id: str) -> bool:
    return storage.exists(_stop_file(settings, workflow_run_id))


def clear_stop(settings: Settings, workflow_run_id: str) -> None:
    storage.delete(_stop_file(settings, workflow_run_id))


def _slot(workflow: str, slot: int) -> str:
    return f"workflows/{workflow}.{slot}"


def _stop_file(settings: Settings, workflow_run_id: str) -> str:
    return storage.join(str(settings.state_root), "_workflow_stops", workflow_run_id)
