#!/usr/bin/env bash
# Installs deltamark into .venv, then shows incremental jobs end to end: order batches land
# as JSON files, jobs/orders_ingest.py loads new files into a bronze Delta table, and
# jobs/orders_silver.py reads only the bronze versions it has not seen into silver. A batch
# with broken orders is rejected by the ingest's data-quality gate, shown, and resent. Then
# jobs/customers_sync.py keeps a Delta copy of a changing database table (SQLite, over
# JDBC) current: new and updated customers are read by updated_at and merged by id.
# jobs/order_documents.py relationalizes nested order documents into flat tables. The AWS
# Glue script jobs/glue_orders.py runs unchanged but for its imports. Last, the
# workflow conf/workflows/orders_pipeline.yaml runs ingest -> silver -> gold, skips what
# follows a rejected batch, and resumes once the batch is resent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh

export DELTAMARK_STATE_ROOT=data/demo/state
landing=data/demo/landing/orders
bronze=data/demo/lake/bronze/orders
silver=data/demo/lake/silver/orders
quiet() { "$@" 2>&1 | { grep -v -E "WARN|log4j|setLogLevel|incubator" || true; }; }
show() { echo; echo "\$ $*"; quiet "$@"; }
rejected() { if "$@"; then echo "demo: expected the run above to be rejected" >&2; exit 1; fi; }
ingest() { show .venv/bin/deltamark run orders_ingest --arg landing="$landing" --arg target="$bronze" "$@"; }
refine() { show .venv/bin/deltamark run orders_silver --arg bronze="$bronze" --arg target="$silver"; }
shop=data/demo/shop.sqlite
customers=data/demo/lake/silver/customers
sync() { show .venv/bin/deltamark run customers_sync --arg connection="jdbc:sqlite:$shop" --arg target="$customers"; }
documents=data/demo/landing/order_documents
documents_lake=data/demo/lake/documents
relationalize() { show .venv/bin/deltamark run order_documents --arg landing="$documents" --arg lake="$documents_lake"; }
rm -rf data/demo

show .venv/bin/python -m jobs.orders_landing --landing "$landing" --batches 3
ingest
refine
show .venv/bin/python -m jobs.orders_landing --landing "$landing" --batches 2
ingest --dry-run
ingest
refine
ingest
show .venv/bin/python -m jobs.orders_landing --landing "$landing" --batches 1 --broken 4
rejected ingest
show .venv/bin/deltamark dq results orders_ingest
show .venv/bin/python -m jobs.orders_landing --landing "$landing" --resend
ingest
show .venv/bin/deltamark runs list orders_ingest
show .venv/bin/deltamark runs list orders_silver
show .venv/bin/deltamark bookmarks show orders_ingest --files
show .venv/bin/deltamark bookmarks show orders_silver
show .venv/bin/deltamark sql "SELECT run_seq, count(*) AS files FROM processed_files GROUP BY run_seq ORDER BY run_seq"

show .venv/bin/python -m jobs.customers_source --db "$shop" --new 20
sync
show .venv/bin/python -m jobs.customers_source --db "$shop" --new 3 --update 4
sync
show .venv/bin/deltamark bookmarks show customers_sync
show .venv/bin/python -c "from framework.delta import log; t = log.read_rows('$customers'); print(t.num_rows, 'customers,', len(set(t['id'].to_pylist())), 'distinct ids')"

show .venv/bin/python -m jobs.order_documents_landing --landing "$documents" --batches 2 --orders 50
relationalize
show .venv/bin/python -m jobs.order_documents_landing --landing "$documents" --batches 1 --orders 50 --gift-wrap
relationalize
show .venv/bin/python -c "
from pathlib import Path
from framework.delta import log
for table in sorted(Path('$documents_lake').iterdir()):
    rows = log.read_rows(str(table))
    print(f'{table.name:<24} {rows.num_rows:>4} rows  {rows.column_names}')"

# An AWS Glue script (only its imports changed) run by deltamark, twice: the second run
# finds nothing new.
glue() { show .venv/bin/deltamark run --script jobs/glue_orders.py --arg JOB_NAME=glue_orders --arg job-bookmark-option=job-bookmark-enable --arg orders_path="$landing" --arg documents_path="$documents" --arg target=data/demo/lake/glue; }
glue
glue
show .venv/bin/deltamark bookmarks show glue_orders

# The orders pipeline as a workflow, in a directory of its own (the conf's relative paths
# land under it): ingest -> silver (checked) -> gold, each job triggered by the one before.
dm_pipeline() { (cd data/demo/pipeline && export DELTAMARK_STATE_ROOT=state DELTAMARK_CONF_DIR=../../../conf && show ../../../.venv/bin/deltamark "$@"); }
pipeline_landing=data/demo/pipeline/data/landing/orders
mkdir -p data/demo/pipeline
show .venv/bin/python -m jobs.orders_landing --landing "$pipeline_landing" --batches 2
dm_pipeline workflow run orders_pipeline
show .venv/bin/python -m jobs.orders_landing --landing "$pipeline_landing" --batches 1 --broken 2
rejected dm_pipeline workflow run orders_pipeline
workflow_run=$(cd data/demo/pipeline && DELTAMARK_STATE_ROOT=state ../../../.venv/bin/deltamark --conf-dir ../../../conf workflow status orders_pipeline --json | ../../../.venv/bin/python -c "import json, sys; print(json.load(sys.stdin)[0]['workflow_run_id'])")
show .venv/bin/python -m jobs.orders_landing --landing "$pipeline_landing" --resend
dm_pipeline workflow resume "$workflow_run"
dm_pipeline workflow status orders_pipeline
dm_pipeline workflow export orders_pipeline
show .venv/bin/python -c "
from framework.delta import log
t = log.read_rows('data/demo/pipeline/data/lake/gold/daily_revenue').sort_by('order_date')
print(t.num_rows, 'gold rows (day, country);', sum(t['orders'].to_pylist()), 'orders in all')"
