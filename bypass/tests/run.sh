#!/bin/bash
# C tests of libharrier-bypass.so against a freshly started service.
# Run by `make -C bypass test` (root). Everything started here is stopped on
# exit, whatever happens: the service (pins, bpffs mount), processes by PID,
# the temporary directory.
set -u
O=${O:?O=build directory}
HB=${HARRIER_BYPASS:?HARRIER_BYPASS=path of harrier-bypass}
LIB=$O/libharrier-bypass.so
QUOTA=100
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"

[ "$(id -u)" = 0 ] || { echo "bypass tests: need root"; exit 1; }
[ -x "$HB" ] || { echo "bypass tests: $HB missing (run cargo build --release)"; exit 1; }
if [ -e /sys/fs/bpf/harrier-bypass ]; then
	echo "bypass tests: the service is running; stop it first"; exit 1
fi
bpffs_before=$(grep -c " /sys/fs/bpf bpf " /proc/mounts)
TMP=$(mktemp -d /tmp/harrier-bypass-test.XXXXXX)
chmod 755 "$TMP"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	[ -e /sys/fs/bpf/harrier-bypass ] && "$HB" stop >/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What nobody runs and loads, copied where nobody can reach it: the checkout
# (and $O in it) may sit in a 0700 folder (setpriv itself execs with root's
# capabilities, env and the loader then run as nobody). The service attaches
# to both copies of the library (its uprobe follows the file's inode).
cp "$O/bt" "$TMP/bt" && cp "$LIB" "$TMP/libharrier-bypass.so" && chmod 644 "$TMP/libharrier-bypass.so" || exit 1
NLIB=$TMP/libharrier-bypass.so

start() { "$HB" start --slots 2048 --quota $QUOTA --lib "$LIB" --lib "$NLIB" >/dev/null; }
start || exit 1

pass=0 fail=0
run() {
	local name=$1; shift
	local out t="timeout 120"
	[ "$(type -t "$1")" = function ] && t=
	if out=$($t "$@" 2>&1); then
		pass=$((pass + 1)); printf 'ok    %s\n' "$name"
	else
		fail=$((fail + 1)); printf 'FAIL  %s\n' "$name"
		printf '%s\n' "$out" | tail -8 | sed 's/^/      /'
	fi
}
P="env LD_PRELOAD=$LIB BT_EXPECT_BYPASS=1"
W="env BT_EXPECT_BYPASS=1"

run "LD_PRELOAD: getpid & co. = raw syscalls" $P "$O/bt" basic 100000
run "--wrap: getpid & co. = raw syscalls" $W "$O/bt-wrap" basic 100000
run "dlopen of the library after threads exist" $W "$O/bt-dlopen" dlopen "$LIB"
for c in fork fork-thread raw-forks atfork vfork posix_spawn clone clone3 signals orphan \
	 exec exec-thread setuid-mt pidns userns rusage; do
	run "LD_PRELOAD: $c" $P "$O/bt" $c
done
for c in fork vfork clone clone3 exec setuid-mt pidns; do
	run "--wrap: $c" $W "$O/bt-wrap" $c
done
run "64 threads, all answered from the map" $P "$O/bt" threads 64 64 64
run "$((QUOTA + 50)) threads, quota $QUOTA: the rest fall back" $P "$O/bt" threads $((QUOTA + 50)) $((QUOTA - 5)) $QUOTA

# exec of a setuid binary (--wrap build, absolute rpath: LD_PRELOAD is ignored
# for setuid programs) started by nobody: uid 65534, euid 0.
cp "$O/bt-wrap" "$TMP/bt-suid" && chmod 4755 "$TMP/bt-suid"
run "exec of a setuid-root binary by nobody" $NOBODY env BT_EXPECT_BYPASS=1 "$TMP/bt-suid" basic 10000

# /etc/ld.so.preload, inside a private mount namespace only: a copy of /etc
# with the file is bind-mounted over /etc there; the machine's /etc is untouched.
preload_file() {
	cp -a /etc "$TMP/etc" && echo "$LIB" > "$TMP/etc/ld.so.preload" &&
	unshare -m sh -c "mount --make-rprivate / && mount --bind '$TMP/etc' /etc &&
		BT_EXPECT_BYPASS=1 '$O/bt' basic 100000 && BT_EXPECT_BYPASS=1 '$O/bt' fork &&
		BT_EXPECT_BYPASS=1 '$O/bt' setuid-mt"
}
run "/etc/ld.so.preload (private mount namespace)" preload_file

# Security, as nobody, with a root process holding a slot to forge.
$P "$O/bt" hold > "$TMP/hold.out" 2>&1 &
hold=$!; PIDS+=($hold)
for _ in $(seq 100); do grep -q ready "$TMP/hold.out" && break; sleep 0.05; done
run "nobody: mmap PROT_WRITE, mprotect, map update refused; forged nonce refused" \
	$NOBODY env LD_PRELOAD="$NLIB" BT_EXPECT_BYPASS=1 BT_NEED_VICTIM=1 "$TMP/bt" security
run "nobody: $((QUOTA + 30)) threads get at most the quota of $QUOTA slots" \
	$NOBODY env LD_PRELOAD="$NLIB" "$TMP/bt" threads $((QUOTA + 30)) $((QUOTA - 5)) $QUOTA
run "root still registers (nobody's quota is nobody's)" $P "$O/bt" threads 32 32 32
kill "$hold"; wait "$hold" 2>/dev/null

# Stop and restart the service under a running process.
$P "$O/bt" restart "$TMP/restart.flag" > "$TMP/restart.out" 2>&1 &
rp=$!; PIDS+=($rp)
sleep 0.5
"$HB" stop >/dev/null && sleep 0.5 && start && sleep 1.5
touch "$TMP/restart.flag"
if wait "$rp"; then pass=$((pass + 1)); echo "ok    service stopped and restarted under a running process"
else fail=$((fail + 1)); echo "FAIL  service stopped and restarted under a running process"; tail -5 "$TMP/restart.out"; fi

# Hundreds of processes at once (more than the quota: some fall back).
many() {
	local pids=() bad=0
	for _ in $(seq 300); do LD_PRELOAD=$LIB "$O/bt" basic 3000 & pids+=($!); done
	for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
	[ $bad = 0 ] || { echo "$bad of 300 processes failed"; return 1; }
}
run "300 processes at once" many

sleep 0.2
leak() {
	"$HB" status | grep -q "^slots in use: 0 of" || { "$HB" status; return 1; }
}
run "no slot left in use after all test processes exited" leak
"$HB" status | sed -n '3,20p'

"$HB" stop >/dev/null
bpffs_after=$(grep -c " /sys/fs/bpf bpf " /proc/mounts)
stopped() {
	[ ! -e /sys/fs/bpf/harrier-bypass ] && [ ! -e /run/harrier-bypass.state ] &&
	[ "$bpffs_before" = "$bpffs_after" ]
}
run "stop removes pins, state file, and the bpffs mount it made" stopped

echo "bypass: $pass passed, $fail failed"
[ $fail = 0 ]
