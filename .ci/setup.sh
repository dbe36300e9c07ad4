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

# Database sources: Debian's JDBC drivers (the jars conf/deltamark.yaml lists) and the
# PostgreSQL server the tests start on their own port. Installed once; needs root or sudo.
packages=()
[ -e /usr/share/java/postgresql.jar ] || packages+=(libpostgresql-jdbc-java)
[ -e /usr/share/java/sqlite-jdbc.jar ] || packages+=(libxerial-sqlite-jdbc-java)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || packages+=(postgresql)
if [ ${#packages[@]} -gt 0 ]; then
  as_root=""; [ "$(id -u)" -eq 0 ] || as_root="sudo -n"
  if command -v apt-get >/dev/null && $as_root true 2>/dev/null; then
    echo "setup: installing ${packages[*]}"
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends \
      "${packages[@]}" >/dev/null
  else
    echo "setup: cannot install ${packages[*]} (needs apt-get and root or sudo);" \
         "database sources and their tests need them" >&2
  fi
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"

# A class-data-sharing archive of Spark's classes (~170 MB in .venv, written once): every
# local Spark then starts ~4 s sooner. Spark works without it.
.venv/bin/python -m framework.spark 2>/dev/null ||
  echo "setup: could not write the Spark class archive; Spark starts without it" >&2
