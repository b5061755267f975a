#!/bin/bash
# make bench-bypass: the syscall bypass benchmark (see bypass/README.md).
# Needs root and `cargo build --release`. Starts the service itself and stops
# it again on exit (refuses to run if it is already running, since the
# "without the service" columns need it stopped).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
O=${O:-$ROOT/target/release/bypass}
HB=${HARRIER_BYPASS:-$ROOT/target/release/harrier-bypass}
LIB=$O/libharrier-bypass.so
N=${N:-10000000}   # classic test: 10M getpid()
R=${R:-5}          # repetitions; medians are reported

[ "$(id -u)" = 0 ] || { echo "bench-bypass: needs root"; exit 1; }
[ -x "$HB" ] && [ -x "$O/bench" ] || { echo "bench-bypass: run cargo build --release first"; exit 1; }
[ -e /sys/fs/bpf/harrier-bypass ] && { echo "bench-bypass: the service is running; stop it first"; exit 1; }
trap '[ -e /sys/fs/bpf/harrier-bypass ] && "$HB" stop >/dev/null' EXIT

med() { # med CMD...: median of R runs of a command printing one number
	for _ in $(seq "$R"); do "$@" || { echo "bench-bypass: $* failed" >&2; exit 1; }; done |
		sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
pre() { env LD_PRELOAD="$LIB" "$@"; }

echo "bench-bypass: $(uname -r), $(nproc) CPUs, $R runs each, medians"
# Without the service.
g_plain=$(med "$O/bench" getpid "$N")
sc_off=$(med "$O/bench" syscall 3000000)
fk_off=$(med "$O/bench" fork 500)
g_pre_off=$(med pre "$O/bench" getpid "$N")

"$HB" start --lib "$LIB" >/dev/null
g_plain_on=$(med "$O/bench" getpid "$N")
g_pre=$(med pre "$O/bench" getpid "$N")
g_wrap=$(med "$O/bench-wrap" getpid "$N")
sc_on=$(med "$O/bench" syscall 3000000)
fk_on=$(med "$O/bench" fork 500)
reg=$(med pre "$O/bench" register 200)
declare -A fn_on fn_off
for f in getpid gettid getppid getuid geteuid getgid getegid getrusage; do
	fn_on[$f]=$(med pre "$O/bench" fn $f 3000000)
done
"$HB" stop >/dev/null
for f in getpid gettid getppid getuid geteuid getgid getegid getrusage; do
	fn_off[$f]=$(med "$O/bench" fn $f 3000000)
done

x() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }'; }
echo
echo "| classic test: $N getpid(), last result checked | seconds | speed-up |"
echo "|---|---:|---:|"
echo "| glibc getpid(), service stopped | $g_plain | 1.0x |"
echo "| glibc getpid(), service loaded (process without the library) | $g_plain_on | $(x "$g_plain" "$g_plain_on") |"
echo "| LD_PRELOAD, service stopped (fallback) | $g_pre_off | $(x "$g_plain" "$g_pre_off") |"
echo "| LD_PRELOAD, service loaded | $g_pre | $(x "$g_plain" "$g_pre") |"
echo "| -Wl,--wrap, service loaded | $g_wrap | $(x "$g_plain" "$g_wrap") |"
echo
echo "| function | ns/call glibc | ns/call LD_PRELOAD + service | speed-up |"
echo "|---|---:|---:|---:|"
for f in getpid gettid getppid getuid geteuid getgid getegid getrusage; do
	echo "| $f | ${fn_off[$f]} | ${fn_on[$f]} | $(x "${fn_off[$f]}" "${fn_on[$f]}") |"
done
echo
echo "| cost | service stopped | service loaded |"
echo "|---|---:|---:|"
echo "| raw getppid syscall, process without the library (ns) | $sc_off | $sc_on |"
echo "| fork + exit + wait, process without the library (ns) | $fk_off | $fk_on |"
echo "| registration of a thread (first call - second call, ns) | - | $reg |"
