#!/usr/bin/env bash
# Runs the capture-file reader's fuzz target (crates/harrier-capfile/fuzz) for FUZZ_SECONDS
# (10), seeded with the crafted corpus and golden files. Installs cargo-fuzz if missing;
# nightly if installed, else stable with RUSTC_BOOTSTRAP=1. FUZZ_SANITIZER=address for ASan.
set -euo pipefail
cd "$(dirname "$0")/../crates/harrier-capfile/fuzz"
seconds=${FUZZ_SECONDS:-10}
sanitizer=${FUZZ_SANITIZER:-none}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-capfile: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz() { cargo +nightly fuzz "$@"; }
else
    fuzz() { RUSTC_BOOTSTRAP=1 cargo fuzz "$@"; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/corpus"
cp ../tests/corpus/*.hrcap ../tests/golden/*.hrcap "$tmp/corpus/"
echo "fuzz-capfile: read_file for ${seconds}s" >&2
status=0
fuzz run --sanitizer "$sanitizer" read_file "$tmp/corpus" -- \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=1024 -print_final_stats=1 >"$tmp/log" 2>&1 || status=$?
grep -E '^(stat::number_of_executed_units|Done)' "$tmp/log" >&2 || true
if [ "$status" -ne 0 ]; then
    tail -40 "$tmp/log" >&2
    echo "fuzz-capfile: failed (a crash is kept in crates/harrier-capfile/fuzz/artifacts/read_file)" >&2
    exit 1
fi
echo "fuzz-capfile: ok" >&2
