"""Workflows: jobs that depend on each other, declared in ``conf/workflows/<name>.yaml``,
run on this machine (and listed, stopped, resumed) or exported to Airflow."""

from framework.workflows.definition import Workflow, load_workflow, workflow_names
from framework.workflows.export import airflow_dag
from framework.workflows.history import WorkflowRunSummary, workflow_runs
from framework.workflows.orchestrator import (
    WorkflowReport,
    resume_workflow,
    run_workflow,
    stop_workflow,
)

__all__ = ["Workflow", "WorkflowReport", "WorkflowRunSummary", "airflow_dag", "load_workflow",
           "resume_workflow", "run_workflow", "stop_workflow", "workflow_names",
           "workflow_runs"]
