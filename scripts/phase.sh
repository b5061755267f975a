#!/usr/bin/env bash
# make test's phases, timed (wall clock and CPU), one line each at the end:
#   phase.sh start              a fresh record (target/phases.tsv)
#   phase.sh NAME CMD [ARG...]  runs CMD as phase NAME; on failure prints the times so far
#   phase.sh report             one line per phase, the total and the load average
set -uo pipefail
cd "$(dirname "$0")/.."
record=${HARRIER_PHASES:-target/phases.tsv}
mkdir -p "$(dirname "$record")"

report() {
	echo "== make test's phases (wall time, and the CPU time its processes used; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
	awk -F'\t' '{ printf "   %-18s %6d s  %5.1f min  cpu %6d s  %s\n", $1, $2, $2 / 60, $3, $4; t += $2; c += $3 }
		END { printf "   %-18s %6d s  %5.1f min  cpu %6d s\n", "total", t, t / 60, c }' "$record"
}

case ${1:-} in
start) : >"$record" ;;
report) report ;;
"" | -*) echo "usage: $0 start | report | NAME CMD [ARG...]" >&2; exit 2 ;;
*)
	name=$1
	shift
	t0=$(date +%s)
	"$@"
	rc=$?
	[ $rc -eq 0 ] && status= || status="FAILED (exit $rc)"
	# CPU: user + system of the finished children, from `times` run in this
	# shell (inside $(...) it would count a subshell's, none).
	times >"$record.times"
	cpu=$(tail -1 "$record.times" | sed 's/[ms]/ /g' | awk '{ printf "%d", $1 * 60 + $2 + $3 * 60 + $4 }')
	rm -f "$record.times"
	printf '%s\t%d\t%d\t%s\n' "$name" $(($(date +%s) - t0)) "$cpu" "$status" >>"$record"
	[ $rc -eq 0 ] || report >&2
	exit $rc
	;;
esac
