"""Workflows: jobs that depend on each other, declared in ``conf/workflows/<name>.yaml``,
run on this machine or exported to Airflow."""

from framework.workflows.definition import Workflow, load_workflow, workflow_names
from framework.workflows.export import airflow_dag
from framework.workflows.runner import WorkflowReport, resume_workflow, run_workflow

__all__ = ["Workflow", "WorkflowReport", "airflow_dag", "load_workflow", "resume_workflow",
           "run_workflow", "workflow_names"]
