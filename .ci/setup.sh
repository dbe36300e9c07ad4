#!/usr/bin/env bash
# Creates .venv at the repo root and installs deltamark (with test tools) into it.
# Idempotent: a second call only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v java >/dev/null || { echo "setup: Java 17 is required (java not found on PATH)" >&2; exit 1; }
python=""
for candidate in python3.11 python3 python; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    python=$candidate; break
  fi
done
[ -n "$python" ] || { echo "setup: Python >= 3.11 is required" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
