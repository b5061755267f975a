#!/usr/bin/env bash
# make test's phases, timed (wall clock), one line each at the end:
#   phase.sh start              a fresh record (target/phases.tsv)
#   phase.sh NAME CMD [ARG...]  runs CMD as phase NAME; on failure prints the times so far
#   phase.sh report             one line per phase, the total and the load average
set -uo pipefail
cd "$(dirname "$0")/.."
record=${HARRIER_PHASES:-target/phases.tsv}
mkdir -p "$(dirname "$record")"

report() {
	echo "== make test's phases (wall time; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
	awk -F'\t' '{ printf "   %-18s %6d s  %5.1f min  %s\n", $1, $2, $2 / 60, $3; t += $2 }
		END { printf "   %-18s %6d s  %5.1f min\n", "total", t, t / 60 }' "$record"
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
	printf '%s\t%d\t%s\n' "$name" $(($(date +%s) - t0)) "$status" >>"$record"
	[ $rc -eq 0 ] || report >&2
	exit $rc
	;;
esac
