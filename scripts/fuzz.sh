#!/usr/bin/env bash
# Short fuzz pass: each cargo-fuzz target of the named crates (default: all of them)
# runs FUZZ_SECONDS (5) from its seed corpus. `make test` runs it; a crash fails.
#   scripts/fuzz.sh [rules|capfile|scap ...]
# One stable toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes unstable flags), the
# release profile, and one shared target dir (FUZZ_TARGET_DIR, target/fuzz) so the
# three fuzz workspaces build their common dependencies once. The sanitizer is off by
# default (FUZZ_SANITIZER=address for ASan): the code is safe Rust and the short pass
# looks for panics, hangs and huge allocations, which libFuzzer reports either way; ASan
# doubles the build. New inputs go to a temporary corpus; a crash is kept in the crate's
# fuzz/artifacts/TARGET/ and its log tail is printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-5}
sanitizer=${FUZZ_SANITIZER:-none}
target_dir=${FUZZ_TARGET_DIR:-$root/target/fuzz}

# crate -> fuzz targets, and the longest input each may grow to.
declare -A TARGETS=([rules]="parse_condition load_rules" [capfile]="read_file unpack" [scap]="convert")
declare -A MAX_LEN=([rules]=8192 [capfile]=65536 [scap]=131072)

# seeds CRATE TARGET DIR: copies the target's starting corpus into DIR.
seeds() {
    local crate=$1 target=$2 dir=$3 f
    case $crate in
    rules) cp "$root/crates/harrier-rules/fuzz/seeds/$target/"* "$dir/" ;;
    capfile)
        case $target in
        # Packed event-block payloads (the packed golden's and corpus' blocks).
        unpack) cp "$root/crates/harrier-capfile/fuzz/seeds/unpack/"* "$dir/" ;;
        *) cp "$root"/crates/harrier-capfile/tests/{corpus,golden}/*.hrcap "$dir/" ;;
        esac
        ;;
    scap)
        cp "$root/crates/harrier-scap/fuzz/seeds/convert/"* "$dir/"
        # The real legacy captures too (where the tests find them), gzip ones also
        # decompressed: mutating a deflate stream mostly reaches only gzip's errors.
        local data=${SCAP_DATA_DIR:-}
        if [ -z "$data" ]; then
            for d in "$root/.." "$root/../.." /work; do
                [ -f "$d/shared/data/scap/curl_google.scap" ] && { data=$d/shared/data/scap; break; }
            done
        fi
        [ -n "$data" ] || { echo "fuzz: legacy captures not found (SCAP_DATA_DIR); crafted seeds only" >&2; return 0; }
        for f in "$data"/*.scap; do
            head -c "${MAX_LEN[scap]}" "$f" >"$dir/$(basename "$f")"
            if gzip -t "$f" 2>/dev/null; then
                gzip -dc "$f" | head -c "${MAX_LEN[scap]}" >"$dir/$(basename "$f" .scap).raw.scap" || true
            fi
        done
        ;;
    esac
}

crates=("$@")
[ ${#crates[@]} -gt 0 ] || crates=(rules capfile scap)
for c in "${crates[@]}"; do
    [ -n "${TARGETS[$c]:-}" ] || { echo "fuzz: unknown crate '$c' (rules, capfile, scap)" >&2; exit 2; }
done

bash "$root/scripts/deps-fuzz.sh"
export RUSTC_BOOTSTRAP=1
fuzz() { cargo fuzz "$@"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "${crates[@]}"; do
    cd "$root/crates/harrier-$c/fuzz"
    start=$SECONDS
    fuzz build --release --sanitizer "$sanitizer" --target-dir "$target_dir" >"$tmp/build.log" 2>&1 ||
        { tail -40 "$tmp/build.log" >&2; echo "fuzz: building $c's targets failed" >&2; exit 1; }
    echo "fuzz: $c built in $((SECONDS - start))s" >&2
    for t in ${TARGETS[$c]}; do
        mkdir -p "$tmp/$c-$t"
        seeds "$c" "$t" "$tmp/$c-$t"
        status=0
        fuzz run --release --sanitizer "$sanitizer" --target-dir "$target_dir" "$t" "$tmp/$c-$t" -- \
            -max_total_time="$seconds" -max_len="${MAX_LEN[$c]}" -timeout=10 -rss_limit_mb=1024 \
            -print_final_stats=1 >"$tmp/$t.log" 2>&1 || status=$?
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.log")
        if [ "$status" -ne 0 ]; then
            tail -40 "$tmp/$t.log" >&2
            echo "fuzz: $c/$t failed (the input is kept in crates/harrier-$c/fuzz/artifacts/$t)" >&2
            exit 1
        fi
        echo "fuzz: $c/$t ok, ${runs:-?} runs in ${seconds}s" >&2
    done
done
