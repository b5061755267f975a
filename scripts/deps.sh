#!/usr/bin/env bash
# Installs what building, testing and benchmarking Harrier needs on Debian,
# skipping what is already there. Run as root (make run / make test do).
set -euo pipefail

PACKAGES=(
  clang llvm libelf-dev zlib1g-dev pkg-config make gcc   # BPF and C builds
  bpftool                                                # vmlinux.h regeneration
  redis-server redis-tools                               # bench-capture workload
  inotify-tools linux-perf valgrind                      # comparisons and profiling
  fonts-dejavu-core                                      # text in benchmark charts
  runc busybox-static iproute2                           # container tests; ip: the live SSH rule test's network namespace
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# sysdig 0.29 unpacked under /opt: the reference reader of legacy .scap files (harrier-scap's tests).
bash "$(dirname "$0")/deps-sysdig.sh"
# DuckDB (PyPI, in a venv) reads the Parquet export in its test.
bash "$(dirname "$0")/deps-duckdb.sh"
# make test's own tools come with the steps that use them: cargo-fuzz
# (scripts/fuzz.sh), qemu, Debian's kernels and virtme-ng (scripts/test-kernels.sh),
# cargo-deb and lintian (make deb, make test-packaging).

# A distribution redis-server may have started itself: the benchmark runs its
# own on a private port, so a service left running is not ours to stop.

if ! command -v cargo >/dev/null; then
  echo "deps: cargo not found: install Rust >= 1.82 (rustup) and re-run" >&2
  exit 1
fi
