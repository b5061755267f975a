#!/usr/bin/env bash
# cargo-fuzz, pinned, for scripts/fuzz.sh (make test's short fuzz pass). Skipped when
# that version is already installed. The fuzz targets build with the stable toolchain
# and RUSTC_BOOTSTRAP=1 (see fuzz.sh), so no nightly toolchain is installed.
set -euo pipefail
version=0.13.2
if cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $version"; then
    exit 0
fi
echo "deps: installing cargo-fuzz $version" >&2
cargo install cargo-fuzz --version "$version" --locked
