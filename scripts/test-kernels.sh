#!/usr/bin/env bash
# The kernel matrix: every test binary of the workspace (the BPF-loading ones
# included) and the bypass C tests, on the host's kernel and on Debian 12's
# kernels, 6.1 and 6.12, each booted under qemu with virtme-ng
# (scripts/deps-vm.sh installs them).
#
#   scripts/test-kernels.sh                    host, then the guests (make test-kernels)
#   scripts/test-kernels.sh guest [KERNEL...]  guests only (make test: the host run is its own step)
#   scripts/test-kernels.sh host               host only
#   scripts/test-kernels.sh exec KERNEL CMD... CMD in one guest, run in the
#                                              checkout instead of the tests
#                                              (benchmarks: make bench-hooks)
# KERNEL: 6.1 or 6.12 (the newest /boot/vmlinuz-KERNEL.*) or a vmlinuz path;
# default both Debian kernels, booted side by side (each guest's single-threaded
# TCG keeps one host core busy; HARRIER_VM_PARALLEL=0 boots one after the other).
#
# The test executables are built once on the host (cargo test --no-run) and the
# guest runs those very files: it sees the host's root read-only, and the
# checkout and its target dir mapped explicitly (read-only, at their host paths,
# so a checkout under /tmp, which the guest mounts a tmpfs over, works too).
# New test binaries are picked up from cargo's list, nothing to register here.
# Env: HARRIER_VM_KVM=1 (use KVM; nested KVM triple-faults on our CI machines),
#      HARRIER_TEST_SCALE (loop divisor in the guest, default 20),
#      HARRIER_VM_CPUS (2), HARRIER_VM_MEMORY (2G), HARRIER_VM_APPEND (more
#      kernel words), HARRIER_VM_QEMU_OPTS (more qemu options, e.g. "-icount
#      shift=0": the guest's clock counts instructions), HARRIER_VM_STALL (s without a guest heartbeat, 120),
#      HARRIER_VM_LIMIT (s for one VM, 2400), HARRIER_VM_TCG (single; multi),
#      HARRIER_VM_PARALLEL (1), HARRIER_VM_ONLY (an ERE: only the test binaries
#      whose name, e.g. harrier-cli:fswatch_cli, matches; the dispatcher and
#      bypass C tests too by their names, "core ..." and "bypass C tests"),
#      HARRIER_VM_OUT (the files' dir below the checkout, default
#      TARGET/test-kernels: another for a second run beside a running one).
# Per guest KERNEL, in TARGET/test-kernels: guest-KERNEL.log (what the guest
# printed), .console (its kernel's console: printed only when it fails or
# stalls), .qmp (qemu's view of a stalled guest).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-all}
[ $# -eq 0 ] || shift
CARGO=${CARGO:-cargo}
TARGET=$($CARGO metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
OUT=${HARRIER_VM_OUT:-$TARGET/test-kernels}
VNG=/opt/harrier-vng/bin/vng
mkdir -p "$OUT"

# Test executables, one line each: path, package dir (cargo's cwd for tests), name.
list_tests() {
	$CARGO test --release --locked --workspace --no-run --message-format=json |
		python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
        continue
    t = m["target"]
    name = os.path.basename(os.path.dirname(m["manifest_path"])) + ":" + ("lib" if "lib" in t["kind"] else t["name"])
    print("\t".join([m["executable"], os.path.dirname(m["manifest_path"]), name]))
' | sort -t$'\t' -k3 | awk -F'\t' -v only="${HARRIER_VM_ONLY:-}" 'only == "" || $3 ~ only' >"$OUT/tests.tsv"
	[ -s "$OUT/tests.tsv" ] || { echo "test-kernels: cargo listed no test binary${HARRIER_VM_ONLY:+ matching $HARRIER_VM_ONLY}" >&2; exit 1; }
}

host() {
	echo "== host kernel $(uname -r)"
	$CARGO test --release --locked --workspace
	make -C bypass test
}

# The vmlinuz a KERNEL argument names: a path, or the newest /boot/vmlinuz-KERNEL.*
# ("6.1." does not match 6.12's files).
vmlinuz() {
	if [[ $1 == */* ]]; then echo "$1"; else ls /boot/vmlinuz-"$1".* 2>/dev/null | sort -V | tail -1; fi
}

guest() {
	local kernels=("$@") k kernel tags=() rc=0 t0=$SECONDS
	((${#kernels[@]})) || kernels=(6.1 6.12)
	bash scripts/deps-vm.sh # qemu, the kernels, virtme-ng: nothing to do once there
	[ -x "$VNG" ] || { echo "test-kernels: $VNG missing (run scripts/deps-vm.sh)" >&2; exit 1; }
	for k in "${kernels[@]}"; do
		kernel=$(vmlinuz "$k")
		[ -n "$kernel" ] && [ -e "$kernel" ] || { echo "test-kernels: no $k kernel in /boot (run scripts/deps-vm.sh)" >&2; exit 1; }
	done
	# The workspace's own build (nothing to do after make build): the bypass
	# C tests and harrier-bypass come from it, the test binaries from cargo test's.
	echo "== test binaries for the guests"
	$CARGO build --release --locked --workspace
	list_tests
	# A copy of the guest script: bash reads a script as it runs, so editing
	# the original during a run would make the guest execute garbage.
	cp scripts/vm-guest.sh "$OUT/vm-guest.sh"
	for k in "${kernels[@]}"; do
		k=$(basename "$k")
		tags+=("${k#vmlinuz-}")
	done
	local i r pids=()
	for i in "${!kernels[@]}"; do
		k=${tags[i]} kernel=$(vmlinuz "${kernels[i]}")
		if [ "${HARRIER_VM_PARALLEL:-1}" = 1 ] && ((${#kernels[@]} > 1)); then
			# Side by side, each guest's lines tagged with its kernel.
			{ guest_run "$k" "$kernel" 2>&1 && r=0 || r=1; echo $r >"$OUT/guest-$k.rc"; } | sed -u "s/^/[$k] /" &
			pids+=($!)
		else
			guest_run "$k" "$kernel" && r=0 || r=1
			echo $r >"$OUT/guest-$k.rc"
		fi
	done
	((${#pids[@]} == 0)) || wait "${pids[@]}"
	local summary=()
	for k in "${tags[@]}"; do
		if [ "$(cat "$OUT/guest-$k.rc")" = 0 ]; then summary+=("$k passed"); else summary+=("$k FAILED"); rc=1; fi
	done
	echo "== guests: ${summary[*]}; $((SECONDS - t0)) s"
	return $rc
}

# One guest: boots KERNEL, runs every test binary; true if all passed. A test
# that failed fails at once. A binary that never ended (HUNG, its threads'
# kernel stacks above) or a guest that stopped answering gets one more VM for
# what had not passed yet (the console has the diagnostics).
# Usage: guest_run TAG KERNEL (files TARGET/test-kernels/guest-TAG.*)
guest_run() {
	local tag=$1 kernel=$2 kvm=--disable-kvm t0=$SECONDS hung
	local log=$OUT/guest-$tag.log done=$OUT/guest-$tag.done
	[ "${HARRIER_VM_KVM:-0}" = 1 ] && kvm=
	echo "== guest kernel $(basename "$kernel") (qemu, ${kvm:-KVM}): $(wc -l <"$OUT/tests.tsv") test binaries + bypass C tests"
	: >"$done"
	if boot "$tag" "$kernel" "$kvm" "$done" "$log"; then
		echo "== guest $tag took $((SECONDS - t0)) s (boot included)"
		return 0
	fi
	if grep -q '^guest [^ ]*: FAIL ' "$log"; then
		echo "test-kernels: tests failed on $(basename "$kernel")" >&2
		return 1
	fi
	grep -ao 'harrier-guest: passed .*' "${log%.log}.console" | tr -d '\r' | cut -d' ' -f3- >"$done"
	hung=$(sed -n 's/^guest [^ ]*: HUNG  //p' "$log" | tr '\n' ' ')
	echo "== hung in the guest: ${hung:-the guest itself (see above)}; once more in a fresh VM for what had not passed ($(wc -l <"$done") had)"
	if ! boot "$tag" "$kernel" "$kvm" "$done" "${log%.log}-retry.log"; then
		echo "test-kernels: tests failed on $(basename "$kernel") (hung, then failed again)" >&2
		return 1
	fi
	echo "== guest $tag took $((SECONDS - t0)) s (boot included, one retry after: ${hung:-a stalled guest})"
}

# Boots KERNEL once and runs vm-guest.sh on the test list; true if all passed.
# The guest's kernel console goes to LOG's .console file (not shown unless the
# run fails or stalls). A host-side watchdog (the guest's own can stall with
# it) ends a guest whose console heartbeat stopped for STALL s or that runs
# past LIMIT s, after asking qemu for its vCPUs' state over QMP.
boot() {
	local tag=$1 kernel=$2 kvm=$3 done=$4 log=$5 list=$OUT/tests.tsv
	local console=${log%.log}.console qmp=$OUT/qmp-$tag.sock pidfile=$OUT/qemu-$tag.pid
	local limit=${HARRIER_VM_LIMIT:-2400} stall=${HARRIER_VM_STALL:-120}
	rm -f "$qmp" "$pidfile"
	: >"$log"
	: >"$console"
	# The rules tests act for real (files below /usr/local/bin, /var/log, /etc, runc
	# state in /run): those trees are writable overlays in the guest, gone after.
	# --verbose: the kernel's messages at every level on the console.
	# A hung task is reported after 60 s, with every CPU's backtrace (sysctls: a bare
	# hung_task_timeout_secs= is no boot parameter, 6.1 ignored it). udev would
	# load kvm for the emulated CPU (-cpu max has SVM): ~40 s of boot for nothing.
	# tsc=reliable: qemu's emulated TSCs all count one host clock, but 6.1 calls
	# a non-Intel multi-CPU TSC unsynchronized and falls back to the HPET, whose
	# every read (each clock_gettime, bpf_ktime_get_ns, timer) is an emulated
	# MMIO access under qemu's global lock, where the vCPUs queue with the 9p
	# root's I/O; with the TSC the boot went from 116 s to 77 s here.
	# One host thread runs both vCPUs (qemu's multi-threaded TCG off): with
	# MTTCG the guest wedged when a BPF attach or detach toggled a tracepoint's
	# static key (the kernel patches its call sites with int3 and an IPI) while
	# the other vCPU ran that site, do_exit's sched_process_exit: both CPUs
	# then spun at do_exit+0x346 in exc_int3 (soft lockups of 339 s and 175 s,
	# RCU stall, 2026-11-23). The guest still has 2 CPUs.
	# HARRIER_VM_TCG=multi brings MTTCG back (see README Kernels for the cost).
	local tcg="-accel tcg,thread=${HARRIER_VM_TCG:-single}"
	[ -z "$kvm" ] && tcg=
	# The checkout and its target dir, mapped read-only beside the host's root:
	# vm-guest.sh binds them back at their host paths after mounting the guest's
	# tmpfs /tmp, which would hide a checkout under /tmp.
	# The guest script runs from there too (the test list and done file are
	# read once they are back in place).
	local maps=(--rodir="/run/harrier/checkout=$ROOT") script=/run/harrier/checkout/${OUT#"$ROOT"/}/vm-guest.sh
	if [[ $TARGET/ != "$ROOT"/* ]]; then
		maps+=(--rodir="/run/harrier/target=$TARGET")
		script=/run/harrier/target/test-kernels/vm-guest.sh
	fi
	PATH=/opt/harrier-vng/bin:$PATH "$VNG" $kvm --verbose --cpus "${HARRIER_VM_CPUS:-2}" --memory "${HARRIER_VM_MEMORY:-2G}" -r "$kernel" \
		--append "sysctl.kernel.hung_task_timeout_secs=60 sysctl.kernel.hung_task_all_cpu_backtrace=1 softlockup_all_cpu_backtrace=1 modprobe.blacklist=kvm,kvm_amd,kvm_intel tsc=reliable ${HARRIER_VM_APPEND:-}" \
		--overlay-rwdir /etc --overlay-rwdir /var --overlay-rwdir /usr/local --overlay-rwdir /run "${maps[@]}" \
		--qemu-opts="-qmp unix:$qmp,server=on,wait=off -pidfile $pidfile $tcg ${HARRIER_VM_QEMU_OPTS:-}" \
		--exec "GUEST_DONE=$done GUEST_ONLY='${HARRIER_VM_ONLY:-}' GUEST_EXEC='${GUEST_EXEC:-}' bash $script $list $ROOT $TARGET 2>&1" >"$log" 2>"$console" </dev/null &
	local vpid=$! t0=$SECONDS why= beats=0 n last=$SECONDS
	tail -n +1 -f --pid=$vpid "$log" &
	local tpid=$!
	while kill -0 $vpid 2>/dev/null; do
		sleep 2
		# Heartbeats counted, not the console's age: a wedged guest's kernel
		# keeps writing (RCU stall and soft lockup reports).
		n=$(grep -ac 'harrier-guest: alive' "$console")
		((n == beats)) || { beats=$n last=$SECONDS; }
		if ((SECONDS - t0 > limit)); then
			why="no result after $limit s"
		elif ((beats > 0 && SECONDS - last > stall)); then
			why="no heartbeat from the guest for $((SECONDS - last)) s"
		fi
		[ -z "$why" ] || { stalled "$why" "$log" "$console" "$qmp" "$pidfile"; break; }
	done
	wait $vpid
	local rc=$?
	wait $tpid 2>/dev/null
	# Both the exit code (virtme-ng passes the command's on) and the closing line.
	if [ -z "$why" ] && [ "$rc" = 0 ] && grep -Eq '^kernel [^ ]+: [0-9]+ passed, 0 failed' "$log"; then
		return 0
	fi
	if [ -z "$why" ]; then
		echo "== guest exited $rc; its kernel console's end ($console):"
		console_tail "$console" 60
	fi
	return 1
}

# The console without the heartbeats, last N lines.
console_tail() {
	grep -av 'harrier-guest: alive' "$1" | tail -n "$2" | tr -d '\r' | sed 's/^/   console: /'
}

# A guest that stopped: what it was running, qemu's view of its vCPUs (where
# each one is, its local APIC timer), whether an NMI brings it back, then the
# VM is ended and the console's end printed.
stalled() {
	local why=$1 log=$2 console=$3 qmp=$4 pidfile=$5 qpid dump=${2%.log}.qmp
	echo "== guest stalled: $why"
	echo "   running: $(grep -ao 'harrier-guest: start .*' "$console" | tail -1 | tr -d '\r' | cut -d' ' -f3-)"
	echo "   last heartbeat: $(grep -ao 'harrier-guest: alive.*' "$console" | tail -1 | tr -d '\r')"
	local cmds=(query-status "hmp:info cpus" "hmp:info registers -a")
	for c in $(seq 0 $((${HARRIER_VM_CPUS:-2} - 1))); do cmds+=("hmp@$c:info lapic"); done
	timeout 60 /usr/bin/python3 scripts/vm-qmp.py "$qmp" "${cmds[@]}" >"$dump" 2>&1
	echo "   vCPUs (full dump in $dump):"
	grep -E '^-- hmp@|^CPU#|^RIP=|^LVTT|^Timer' "$dump" | sed 's/^/     /' | head -40
	local before
	before=$(stat -c %s "$console")
	timeout 30 /usr/bin/python3 scripts/vm-qmp.py "$qmp" inject-nmi >>"$dump" 2>&1
	sleep 30
	if [ "$(stat -c %s "$console")" != "$before" ]; then
		echo "   after an NMI the console moved again:"
		tail -c +$((before + 1)) "$console" | tail -20 | sed 's/^/     /'
	else
		echo "   an NMI did not bring it back"
	fi
	qpid=$(cat "$pidfile" 2>/dev/null)
	# qemu's own threads, should the emulator rather than the guest be stuck
	# (a QMP that did not answer above points there).
	if [ -n "$qpid" ]; then
		echo "   qemu's threads (name, state, where in the host kernel):"
		for t in /proc/$qpid/task/*; do
			echo "     $(cat $t/comm 2>/dev/null) $(awk '{ print $3 }' $t/stat 2>/dev/null) $(cat $t/wchan 2>/dev/null)"
		done
		command -v gdb >/dev/null && timeout 60 gdb -p "$qpid" -batch -ex 'thread apply all bt 15' >>"$dump" 2>&1
	fi
	if [ -n "$qpid" ]; then
		kill "$qpid" 2>/dev/null
		for _ in $(seq 20); do kill -0 "$qpid" 2>/dev/null || break; sleep 1; done
		kill -9 "$qpid" 2>/dev/null
	fi
	echo "== the guest's kernel console's end ($console):"
	console_tail "$console" 80
}

# One command in a guest of KERNEL instead of the tests, run in the checkout;
# its output is the guest's log. Usage: exec_in_guest KERNEL CMD...
exec_in_guest() {
	local kernel tag
	(($# > 1)) || { echo "usage: $0 exec KERNEL CMD..." >&2; exit 2; }
	kernel=$(vmlinuz "$1")
	shift
	bash scripts/deps-vm.sh
	[ -n "$kernel" ] && [ -e "$kernel" ] || { echo "test-kernels: no such kernel in /boot (run scripts/deps-vm.sh)" >&2; exit 1; }
	tag=$(basename "$kernel")
	tag=exec-${tag#vmlinuz-}
	printf '%q ' "$@" >"$OUT/guest-$tag.sh"
	echo >>"$OUT/guest-$tag.sh"
	cp scripts/vm-guest.sh "$OUT/vm-guest.sh"
	: >"$OUT/guest-$tag.done"
	echo "== $* in a guest of $(basename "$kernel") (qemu${HARRIER_VM_QEMU_OPTS:+ $HARRIER_VM_QEMU_OPTS})"
	# In a condition, as guest_run calls it: boot's steps may fail (set -e).
	if GUEST_EXEC=$OUT/guest-$tag.sh boot "$tag" "$kernel" --disable-kvm "$OUT/guest-$tag.done" "$OUT/guest-$tag.log"; then
		return 0
	fi
	echo "test-kernels: $* failed in the guest ($OUT/guest-$tag.log)" >&2
	return 1
}

case $MODE in
all) host; guest "$@" ;;
host) host ;;
guest) guest "$@" ;;
exec) exec_in_guest "$@" ;;
*) echo "usage: $0 [all|host|guest] [KERNEL...] | exec KERNEL CMD..." >&2; exit 2 ;;
esac
