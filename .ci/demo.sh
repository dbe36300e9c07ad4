#!/usr/bin/env bash
# Installs deltamark into .venv and runs the demo pipeline twice, then shows the state.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
for run in 1 2; do .venv/bin/python -m jobs.orders_demo 2> >(grep -v -E "WARN|log4j|setLogLevel" >&2); done
echo; echo "$ deltamark runs list orders_demo"
.venv/bin/deltamark runs list orders_demo
echo; echo "$ deltamark bookmarks show orders_demo"
.venv/bin/deltamark bookmarks show orders_demo
echo; echo "$ deltamark sql \"select job, run_seq, status from runs\" --json"
.venv/bin/deltamark sql "select job, run_seq, status from runs" --json
