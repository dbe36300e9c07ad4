#!/usr/bin/env bash
# What only the tests need, beside .venv:
# - S3Proxy from Maven Central (a Java S3 server holding 100,000+ objects, tests/s3.py);
# - OpenLineage's Spark listener from Maven Central (tests/test_lineage.py);
# - Apache Airflow 3 from PyPI in a virtualenv of its own (.venv/airflow: Airflow's
#   dependencies stay apart from deltamark's), with its OpenLineage provider, for the
#   Airflow export's tests (~10 s once with uv, ~35 s with pip);
# - Debian's Chromium, which the operations page's browser tests drive, and rsync, which
#   copies a landing tree in as users do (both need root or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
AIRFLOW_VERSION=3.3.2
AIRFLOW_OPENLINEAGE_VERSION=2.20.3  # its provider: the parent a task hands its deltamark run
S3PROXY_VERSION=2.6.0  # tests/s3.py names the same
OPENLINEAGE_SPARK_VERSION=1.53.0  # tests/test_lineage.py names the same
tools=.venv/share/deltamark/test-tools
if [ ! -e "$tools/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar" ]; then
  mvn -B -q -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
    -DoutputDirectory="$tools"
fi
if [ ! -e "$tools/openlineage-spark_2.13-$OPENLINEAGE_SPARK_VERSION.jar" ]; then
  mvn -B -q -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="io.openlineage:openlineage-spark_2.13:$OPENLINEAGE_SPARK_VERSION" \
    -DoutputDirectory="$tools"
fi
if ! .venv/airflow/bin/airflow version 2>/dev/null | grep -qx "$AIRFLOW_VERSION" ||
   ! .venv/airflow/bin/pip show -q "apache-airflow-providers-openlineage" 2>/dev/null; then
  .venv/bin/python -m venv .venv/airflow
  if [ -x .venv/bin/uv ]; then  # .ci/setup.sh's installer
    install=(.venv/bin/uv pip install --quiet --compile-bytecode --python .venv/airflow/bin/python)
  else
    install=(.venv/airflow/bin/python -m pip install --quiet --disable-pip-version-check)
  fi
  "${install[@]}" "apache-airflow==$AIRFLOW_VERSION" \
    "apache-airflow-providers-openlineage==$AIRFLOW_OPENLINEAGE_VERSION"
fi
packages=()
[ -x /usr/bin/chromium ] || packages+=(chromium)
command -v rsync >/dev/null || packages+=(rsync)
if [ ${#packages[@]} -gt 0 ]; then
  as_root=""; [ "$(id -u)" -eq 0 ] || as_root="sudo -n"
  if command -v apt-get >/dev/null && $as_root true 2>/dev/null; then
    echo "test tools: installing ${packages[*]}"
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends \
      "${packages[@]}" >/dev/null
  else
    echo "test tools: cannot install ${packages[*]} (needs apt-get and root or sudo); the" \
         "operations page's browser tests and the landing-copy tests need them" >&2
  fi
fi
