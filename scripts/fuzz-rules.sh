#!/usr/bin/env bash
# Runs each fuzz target of crates/harrier-rules/fuzz for a few seconds (FUZZ_SECONDS, 10).
# Installs cargo-fuzz if missing. Uses the nightly toolchain when installed, else stable
# with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs unstable compiler flags). The sanitizer is off by
# default (FUZZ_SANITIZER=address to turn ASan on): the code is safe Rust and what the
# short run looks for are panics, which libFuzzer reports either way; ASan doubles the
# build time. New inputs go to a temporary corpus; a crash is kept in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../crates/harrier-rules/fuzz"
seconds=${FUZZ_SECONDS:-10}
sanitizer=${FUZZ_SANITIZER:-none}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-rules: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz() { cargo +nightly fuzz "$@"; }
else
    fuzz() { RUSTC_BOOTSTRAP=1 cargo fuzz "$@"; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for target in parse_condition load_rules; do
    mkdir -p "$tmp/$target"
    echo "fuzz-rules: $target for ${seconds}s" >&2
    status=0
    fuzz run --sanitizer "$sanitizer" "$target" "$tmp/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 >"$tmp/$target.log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|Done)' "$tmp/$target.log" >&2 || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$tmp/$target.log" >&2
        echo "fuzz-rules: $target failed (a crash is kept in crates/harrier-rules/fuzz/artifacts/$target)" >&2
        exit 1
    fi
done
echo "fuzz-rules: ok" >&2
