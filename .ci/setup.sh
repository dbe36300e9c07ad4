#!/usr/bin/env bash
# Creates .venv at the repo root and installs deltamark (with test tools) into it, on a
# Spark line: DELTAMARK_SPARK=3.5 (or 4.0, 4.1, 4.2, 4.3, or an exact version such as 3.5.4)
# bash .ci/setup.sh; the default is the newest line Delta has jars for. DELTAMARK_VENV
# names another virtualenv (CI's compatibility runs use .venv/spark-3.5 and the like).
# Idempotent: a second call only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

# The pyspark of each line that the set-up installs (the version its jars were checked on).
spark=${DELTAMARK_SPARK:-4.2}
case "$spark" in
  3.5) pyspark=3.5.7 ;; 4.0) pyspark=4.0.1 ;; 4.1) pyspark=4.1.1 ;; 4.2) pyspark=4.2.0 ;;
  4.3) pyspark=4.3.0 ;;
  3.5.* | 4.[0-3].*) pyspark=$spark ;;
  *) echo "setup: DELTAMARK_SPARK=$spark is not a Spark line deltamark supports" \
          "(3.5, 4.0, 4.1, 4.2, 4.3, or a version of one)" >&2; exit 2 ;;
esac
venv=${DELTAMARK_VENV:-.venv}

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

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# uv installs what pip would (the same versions) in under half its time; pip where uv
# cannot be had.
# Bytecode is compiled at install (pip does; uv with --compile-bytecode, which compiles the
# whole site-packages): where PYTHONDONTWRITEBYTECODE is set, as in many containers, Python
# never writes it, and every process (each deltamark command, each Spark Python worker)
# would compile its ~750 modules again, ~1.5 s of CPU. compileall catches up a virtualenv
# installed before.
if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check uv 2>/dev/null; then
  install=("$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python")
else
  install=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
fi
"${install[@]}" -e ".[test]" "pyspark==$pyspark"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -d "$site/pyspark/__pycache__" ] || "$venv/bin/python" -m compileall -q -j 0 "$site" >/dev/null
"$venv/bin/python" -m compileall -q framework state_tables jobs >/dev/null  # installed editable

# Delta's, S3A's, Avro's and Iceberg's jars for that Spark from Maven, without what pyspark
# ships (once per jar set): the native Delta path, s3:// on Spark, Spark's Avro reader,
# Iceberg tables (on the lines Iceberg has a Spark runtime for).
"$venv/bin/python" -m framework.spark.jars

# For local Spark JVMs (written once into the virtualenv): a Hadoop local file system that needs no
# chmod processes (javac), and a class-data-sharing archive of Spark's and Delta's classes
# (~40 s, ~200 MB): local writes take ~50 ms less, a JVM starts ~4 s sooner. Spark works without.
"$venv/bin/python" -m framework.setup.local_jvm 2>/dev/null ||
  echo "setup: could not prepare the local JVM extras; Spark works without them" >&2
