#!/usr/bin/env bash
# Runs inside the guest kernel booted by scripts/test-kernels.sh (virtme-ng:
# the host's root is shared read-only, the guest is a throw-away machine).
# Usage: vm-guest.sh LIST ROOT TARGET
#   LIST: lines "executable<TAB>package dir<TAB>name" (cargo test binaries)
#   ROOT: the workspace, TARGET: its target dir (test-kernels.sh maps both
#   into the guest at /run/harrier/, bound back at their paths below)
# Prints one line per test binary and a closing "kernel X: N passed, M failed"
# line; exits non-zero when anything failed.
set -u
LIST=$1 ROOT=$2 TARGET=$3
KREL=$(uname -r)

# What the tests need from a real boot: bpffs, tracefs, and a tmpfs /tmp (the
# shared /tmp is 9p/overlay: no fifos, no unix socket binds, no renameat2 flags).
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
mount -t tmpfs -o mode=1777 tmpfs /tmp
# The checkout and its target dir at their host paths (and the test list in
# it): the tmpfs above hides one that lies under /tmp.
bind_back() { mkdir -p "$2" && mount --bind "$1" "$2"; }
bind_back /run/harrier/checkout "$ROOT" || { echo "guest: cannot map the checkout at $ROOT"; exit 1; }
[ ! -d /run/harrier/target ] || bind_back /run/harrier/target "$TARGET" || { echo "guest: cannot map the target dir at $TARGET"; exit 1; }
mountpoint -q /dev/shm || { mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm; }
# The guest's cgroup2 root leaves the cpu controller off for children; the
# rules benchmark's quota group needs it (the host has cgroup v1's cpu).
[ -e /sys/fs/cgroup/cgroup.subtree_control ] && { echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null
# virtme-ng mounts files of its own over some of /etc (shadow): useradd, which
# the rules tests use for temporary users, replaces them by rename(2), which a
# mount point refuses (EBUSY). Their contents go into the writable /etc instead.
for f in /etc/passwd /etc/shadow /etc/group /etc/gshadow; do
	if mountpoint -q "$f" 2>/dev/null; then
		cp -p "$f" /tmp/.harrier-etc && umount "$f" && cat /tmp/.harrier-etc >"$f"
		rm -f /tmp/.harrier-etc
	fi
done
export TMPDIR=/tmp
export CI=true
# Emulated CPUs run BPF 10-1000x slower: looping tests divide their counts.
export HARRIER_TEST_SCALE=${HARRIER_TEST_SCALE:-20}
# A test binary's time limit (the slowest, harrier-engine:live, took 85 s on a
# quiet machine and 190 s on one loaded ~5x over its 2 cores).
LIMIT=${GUEST_BINARY_LIMIT:-420}

# fswatch's caches never keep directories of network file systems (a server
# can rename them behind the kernel's back: bpf/include/fswatch/walk.h), and
# the guest's root is the host's over 9p, so its tests run chrooted into a
# root on a tmpfs that binds the host's directories (and the guest's /tmp):
# their climbs then meet local file systems only, as on a real machine.
LROOT=/run/harrier-lroot
local_root() {
	local e
	mkdir -p $LROOT && mount -t tmpfs tmpfs $LROOT || return 1
	for e in /*; do
		if [ -L "$e" ]; then
			cp -P "$e" "$LROOT$e"
		elif [ -d "$e" ] && [ "$e" != /run ]; then
			mkdir "$LROOT$e" && mount --rbind "$e" "$LROOT$e" || return 1
		fi
	done
	mkdir -p $LROOT/run
}
local_root || { echo "guest: cannot set up fswatch's local root at $LROOT"; exit 1; }
# Its suite runs a second time on kprobes (the first takes the best hooks this
# kernel has: fentry before 6.13), when this kernel has them.
FSWATCH_KPROBES=
[ -d /sys/bus/event_source/devices/kprobe ] && FSWATCH_KPROBES=1

# A sleep that runs no program: the guest's root is the host's over 9p, and
# a watchdog that must exec /usr/bin/sleep from there stops with a stuck 9p.
exec {SLEEPFD}<> <(:)
nap() { read -r -t "$1" -u $SLEEPFD; true; }

# Heartbeat on the kernel console (builtins only, so it keeps going while
# anything that needs 9p is stuck): scripts/test-kernels.sh on the host takes
# its absence as a guest that stopped, and it names the binary and the last
# test that finished when the guest stops answering.
heartbeat() {
	local load last
	while :; do
		read -r load </proc/loadavg
		last=
		if [ -e /tmp/test-out.txt ]; then
			mapfile -t lines </tmp/test-out.txt
			for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
				[[ ${lines[i]} == "test "* ]] && { last=${lines[i]}; break; }
			done
		fi
		echo "harrier-guest: alive, load $load; last: ${last:-none}" >/dev/kmsg
		nap 10
	done
}
heartbeat &

# GUEST_EXEC (test-kernels.sh exec): a script to run in the checkout instead of
# the tests (benchmarks: make bench-hooks); its exit code is the guest's.
if [ -n "${GUEST_EXEC:-}" ]; then
	(cd "$ROOT" && bash "$GUEST_EXEC")
	rc=$?
	echo "kernel $KREL: $((rc == 0)) passed, $((rc != 0)) failed"
	exit $rc
fi

# Runs a test binary for at most LIMIT s. A hung one is reported with what
# the kernel says its threads wait on (a task in D state ignores SIGKILL, so
# `timeout` alone would wait for ever), then left behind: the run goes on.
# Usage: run_bounded LIMIT DIR OUT EXE ARGS...; returns the exit code, 124 on a hang.
run_bounded() {
	local limit=$1 dir=$2 out=$3 exe=$4 pid i t
	shift 4
	if [ -n "${IN_LROOT:-}" ]; then
		chroot $LROOT /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$dir" "$exe" "$@" >"$out" 2>&1 &
	else
		(cd "$dir" && exec "$exe" "$@") >"$out" 2>&1 &
	fi
	pid=$!
	for ((i = 0; i < limit; i++)); do
		kill -0 $pid 2>/dev/null || { wait $pid; return; }
		nap 1
	done
	echo "      hung: no exit after $limit s"
	# First what needs no program from the shared root: the kernel's
	# blocked tasks and every CPU's backtrace, on the console (the host
	# prints its tail), then the threads' stacks here.
	{ echo w >/proc/sysrq-trigger; echo l >/proc/sysrq-trigger; } 2>/dev/null
	echo "      its threads (state, kernel stack):"
	for t in /proc/$pid/task/*; do
		# It may end meanwhile (no task left: the glob stays as written).
		local comm=? state=? line
		[ -e "$t/comm" ] || { echo "        (it has ended)"; break; }
		read -r comm <$t/comm
		while read -r line; do [[ $line == State:* ]] && state=${line#State:}; done <$t/status
		echo "        $comm $state"
		while read -r line; do echo "          $line"; done <$t/stack 2>/dev/null
	done
	echo "      unfinished tests:"
	(cd "$dir" && "$exe" --list "$@" 2>/dev/null) | sed -n 's/: test$//p' | sort >/tmp/all.txt
	sed -n 's/^test \(.*\) \.\.\. .*/\1/p' "$out" | sort >/tmp/done.txt
	comm -23 /tmp/all.txt /tmp/done.txt | sed 's/^/        /'
	kill -9 $pid 2>/dev/null
	return 124
}

# GUEST_DONE: a file of names that passed in an earlier VM of this run
# (test-kernels.sh retries only what a stalled guest had not passed yet).
declare -A done_before=()
if [ -n "${GUEST_DONE:-}" ]; then
	while IFS= read -r l; do [ -n "$l" ] && done_before[$l]=1; done <"$GUEST_DONE"
fi
# Each pass goes to the console too, where the host reads it after a stall.
passed() { echo "harrier-guest: passed $1" >/dev/kmsg; }

pass=0 fail=0 failed=()
# Runs one test binary (NAME DIR EXE, then its extra arguments) and reports it.
run_test() {
	local name=$1 dir=$2 exe=$3 out=/tmp/test-out.txt s rc np nf
	shift 3
	s=$(date +%s)
	# cargo runs each test binary from its package directory.
	echo "harrier-guest: start $name" >/dev/kmsg
	run_bounded $LIMIT "$dir" "$out" "$exe" --test-threads=2 "$@"
	rc=$?
	np=$(awk '/^test result:/ { s += $4 } END { print s + 0 }' "$out")
	nf=$(awk '/^test result:/ { s += $6 } END { print s + 0 }' "$out")
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		passed "$name"
		printf 'guest %s: ok    %-40s %4d passed %4d failed  %4ds\n' "$KREL" "$name" "$np" "$nf" $(($(date +%s) - s))
	elif [ $rc -eq 124 ] && [ "$nf" = 0 ]; then
		# No test failed; one never ended (diagnostics above). test-kernels.sh
		# runs it once more in a fresh VM and reports both.
		fail=$((fail + 1)) failed+=("$name")
		printf 'guest %s: HUNG  %s\n' "$KREL" "$name"
	else
		fail=$((fail + 1)) failed+=("$name")
		printf 'guest %s: FAIL  %-40s %4d passed %4d failed  %4ds (exit %d)\n' "$KREL" "$name" "$np" "$nf" $(($(date +%s) - s)) $rc
		# libtest's failure report (once), else the end of the output.
		if grep -q '^failures:' "$out"; then
			awk '/^failures:/ { on = 1 } on && /^test result:/ { exit } on' "$out" | grep -v '^$' | head -60
		else
			tail -20 "$out"
		fi | sed 's/^/      /'
	fi
}

t0=$(date +%s)
while IFS=$'\t' read -r exe dir name; do
	[ -n "$exe" ] || continue
	# Under emulation the dispatcher runs BPF on every guest syscall (~1 ms a
	# run), so the capture tests' dispatcher variants would take hours: the
	# guest runs them per-syscall, plus the DISPATCHER_IN_GUEST ones below.
	skip=()
	case $name in harrier-capture:*) skip=(--skip _dispatcher) ;; esac
	# Read capture files and ../shared/data (not in the guest's view) with no BPF and
	# nothing of the kernel's: filter_parity_cli (sysdig and harrier, 3-4 minutes under
	# emulation), falco_cli (Falco's command line over replays) and harrier-falco's unit
	# tests (the config model). Said, not skipped silently.
	case $name in harrier-cli:filter_parity_cli | harrier-cli:falco_cli | harrier-falco:lib)
		printf 'guest %s: not run %s (kernel-independent: capture files and config only)\n' "$KREL" "$name"
		continue ;;
	# The benchmark's report smoke run (3 minutes under emulation): it measures the
	# sensor the guest's own capture and CLI tests already load; the host runs it.
	harrier-bench:vs_falco)
		printf 'guest %s: not run %s (a report smoke run of a benchmark: the host runs it)\n' "$KREL" "$name"
		continue ;;
	esac
	case $name in
	harrier-fswatch:lib) [ -n "${done_before[$name]:-}" ] || run_test "$name" "$dir" "$exe" ;;
	harrier-fswatch:*)
		[ -n "${done_before[$name]:-}" ] || IN_LROOT=1 run_test "$name" "$dir" "$exe"
		if [ -z "$FSWATCH_KPROBES" ]; then
			printf 'guest %s: not run %s kprobes (this kernel has no kprobes)\n' "$KREL" "$name"
		elif [ -z "${done_before[$name kprobes]:-}" ]; then
			IN_LROOT=1 HARRIER_FSWATCH_HOOKS=kprobes run_test "$name kprobes" "$dir" "$exe"
		fi ;;
	*) [ -n "${done_before[$name]:-}" ] || run_test "$name" "$dir" "$exe" "${skip[@]}" ;;
	esac
done <"$LIST"

# The dispatcher on this kernel: exact counts and the TOCTOU flag.
DISPATCHER_IN_GUEST="exactly_one_exit_event_per_syscall::test_case_2_dispatcher an_open_in_flight_at_attach_is_flagged::test_case_2_dispatcher"
core=$(awk -F'\t' '$3 == "harrier-capture:core" { print $1 "\t" $2 }' "$LIST")
# GUEST_ONLY (HARRIER_VM_ONLY): the test list is filtered on the host; these by name.
only() { [ -z "${GUEST_ONLY:-}" ] || [[ $1 =~ $GUEST_ONLY ]]; }
for t in $DISPATCHER_IN_GUEST; do
	[ -z "${done_before[core $t]:-}" ] && only "core $t" || continue
	s=$(date +%s)
	echo "harrier-guest: start core $t" >/dev/kmsg
	run_bounded $LIMIT "$(cut -f2 <<<"$core")" /tmp/test-out.txt "$(cut -f1 <<<"$core")" --exact "$t"
	rc=$?
	np=$(awk '/^test result:/ { s += $4 } END { print s + 0 }' /tmp/test-out.txt)
	if [ $rc -eq 0 ] && [ "$np" = 1 ]; then
		pass=$((pass + 1))
		passed "core $t"
		printf 'guest %s: ok    %-40s %4d passed %4d failed  %4ds\n' "$KREL" "core $t" 1 0 $(($(date +%s) - s))
	else
		fail=$((fail + 1)) failed+=("core $t")
		printf 'guest %s: FAIL  %-40s (exit %d, %s passed)\n' "$KREL" "core $t" $rc "$np"
		tail -20 /tmp/test-out.txt | sed 's/^/      /'
	fi
done

# The bypass C tests: the built binaries, not `make` (the shared tree is read-only).
if [ -z "${done_before[bypass C tests]:-}" ] && only "bypass C tests"; then
	s=$(date +%s)
	echo "harrier-guest: start bypass C tests" >/dev/kmsg
	O=$TARGET/release/bypass
	# Each of its lines as it comes (timed), so a slow case shows where the time goes.
	O=$O HARRIER_BYPASS=$TARGET/release/harrier-bypass timeout -k 10 $LIMIT bash "$ROOT/bypass/tests/run.sh" 2>&1 |
		while IFS= read -r l; do printf '  bypass %4ds %s\n' $(($(date +%s) - s)) "$l"; done | tee /tmp/bypass-out.txt
	rc=${PIPESTATUS[0]}
	summary=$(tail -1 /tmp/bypass-out.txt | sed 's/^ *bypass *[0-9]*s //')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		passed "bypass C tests"
		printf 'guest %s: ok    %-40s %s  %4ds\n' "$KREL" "bypass C tests" "$summary" $(($(date +%s) - s))
	elif [ $rc -eq 124 ] && ! grep -q '^ *bypass *[0-9]*s FAIL' /tmp/bypass-out.txt; then
		fail=$((fail + 1)) failed+=("bypass C tests")
		{ echo w >/proc/sysrq-trigger; echo l >/proc/sysrq-trigger; } 2>/dev/null
		printf 'guest %s: HUNG  %s (no exit after %d s, after: %s)\n' "$KREL" "bypass C tests" $LIMIT "$summary"
	else
		fail=$((fail + 1)) failed+=("bypass C tests")
		printf 'guest %s: FAIL  %-40s %s  %4ds (exit %d)\n' "$KREL" "bypass C tests" "$summary" $(($(date +%s) - s)) $rc
	fi
fi

echo "guest $KREL: test binaries took $(($(date +%s) - t0)) s"
((fail)) && echo "guest $KREL: failed: ${failed[*]}"
echo "kernel $KREL: $pass passed, $fail failed"
[ $fail -eq 0 ]
