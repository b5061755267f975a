#!/usr/bin/env bash
# DuckDB (from PyPI) in a venv, for the Parquet export test (harrier-cli tests/export_cli.rs):
# /opt/harrier-duckdb/bin/python -c 'import duckdb'. Skips what is already there.
set -euo pipefail
VENV=${HARRIER_DUCKDB_VENV:-/opt/harrier-duckdb}
VERSION=1.1.3
if "$VENV/bin/python" -c "import duckdb, sys; sys.exit(duckdb.__version__ != '$VERSION')" 2>/dev/null; then
  exit 0
fi
echo "deps: DuckDB $VERSION into $VENV"
if ! python3 -m venv "$VENV" 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "duckdb==$VERSION"
