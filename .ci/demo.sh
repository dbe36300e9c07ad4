#!/usr/bin/env bash
# Installs deltamark into .venv, then shows an incremental job end to end: order batches
# land as JSON files, jobs/orders_ingest.py loads them into a bronze Delta table, more
# batches land, and the next run reads only those.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh

export DELTAMARK_STATE_ROOT=data/demo/state
landing=data/demo/landing/orders
target=data/demo/lake/bronze/orders
quiet() { "$@" 2>&1 | { grep -v -E "WARN|log4j|setLogLevel|incubator" || true; }; }
show() { echo; echo "\$ $*"; quiet "$@"; }
rm -rf data/demo

show .venv/bin/python -m jobs.orders_landing --landing "$landing" --batches 3
show .venv/bin/deltamark run orders_ingest --arg landing="$landing" --arg target="$target"
show .venv/bin/python -m jobs.orders_landing --landing "$landing" --batches 2
show .venv/bin/deltamark run orders_ingest --dry-run --arg landing="$landing" --arg target="$target"
show .venv/bin/deltamark run orders_ingest --arg landing="$landing" --arg target="$target"
show .venv/bin/deltamark run orders_ingest --arg landing="$landing" --arg target="$target"
show .venv/bin/deltamark runs list orders_ingest
show .venv/bin/deltamark bookmarks show orders_ingest --files
show .venv/bin/deltamark sql "SELECT run_seq, count(*) AS files FROM processed_files GROUP BY run_seq ORDER BY run_seq"
