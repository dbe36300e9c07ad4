#!/usr/bin/env bash
# For the tests of the Airflow export: Apache Airflow 3 from PyPI in a virtualenv of its
# own (.venv/airflow: Airflow's dependencies stay apart from deltamark's). ~40 s once.
set -euo pipefail
cd "$(dirname "$0")/.."
AIRFLOW_VERSION=3.3.2
if ! .venv/airflow/bin/airflow version 2>/dev/null | grep -qx "$AIRFLOW_VERSION"; then
  .venv/bin/python -m venv .venv/airflow
  .venv/airflow/bin/python -m pip install --quiet --disable-pip-version-check \
    "apache-airflow==$AIRFLOW_VERSION"
fi
