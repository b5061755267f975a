#!/usr/bin/env bash
# Checks of the packaging (make test-packaging, after make deb):
#  - the systemd units pass systemd-analyze verify (and a broken one fails);
#  - lintian reports no error on the .deb;
#  - the .deb unpacked into a scratch root has every file, conffile and
#    maintainer script; its harrier --version runs; its library loads by
#    LD_PRELOAD from the installed path and, with no bypass service attached to
#    that file, answers getpid() with the real syscall;
#  - `make install DESTDIR=...` lays out the same tree (PREFIX=/usr), a
#    /usr/local tree by default, keeps an edited config, and uninstalls;
#  - the Kubernetes DaemonSet validates offline (and a broken one fails).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

KV_BIN=$(bash scripts/deps-packaging.sh | tail -1) || { echo "test-packaging: set-up failed" >&2; exit 1; }
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
DEB=target/debian/harrier_${VERSION}-1_amd64.deb
STAGE=target/release/pkg/root
WORK=$(mktemp -d /tmp/harrier-test-packaging.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
check() { # check NAME COMMAND...: passes when the command exits 0
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then ok "$name"; else fail "$name"; echo "$out" | sed 's/^/    /' >&2; fi
}

[[ -f $DEB ]] || { echo "test-packaging: $DEB missing: run make deb" >&2; exit 1; }

# Every file and symlink the package must hold (besides usr/share/doc).
EXPECTED=(
  etc/harrier/harrier.yaml
  lib/systemd/system/harrier.service
  lib/systemd/system/harrier-bypass.service
  usr/bin/harrier
  usr/lib/harrier/libharrier-bypass.so
  usr/lib/libharrier-bypass.so
  usr/lib/harrier/falco/falco
  usr/share/harrier/rules/harrier_rules.yaml
  usr/share/man/man1/harrier.1.gz
  usr/share/man/man1/harrier-capture.1.gz
  usr/share/man/man1/harrier-fswatch.1.gz
  usr/share/man/man1/harrier-bypass.1.gz
  usr/share/man/man1/harrier-bypass-start.1.gz
  usr/share/man/man1/harrier-bypass-stop.1.gz
  usr/share/man/man1/harrier-bypass-status.1.gz
  usr/share/bash-completion/completions/harrier
  usr/share/zsh/vendor-completions/_harrier
  usr/share/fish/vendor_completions.d/harrier.fish
)

# ---- the package, unpacked into a scratch root
ROOT=$WORK/root
dpkg-deb -x "$DEB" "$ROOT"
dpkg-deb -e "$DEB" "$WORK/control"
for f in "${EXPECTED[@]}"; do
  [[ -e $ROOT/$f || -L $ROOT/$f ]] || fail "package lacks $f"
done
ok "package holds the ${#EXPECTED[@]} expected files"
check "package has copyright and changelog" test -f "$ROOT/usr/share/doc/harrier/copyright" \
  -a -f "$ROOT/usr/share/doc/harrier/changelog.Debian.gz"
check "harrier.yaml is a conffile" grep -qx /etc/harrier/harrier.yaml "$WORK/control/conffiles"
for s in postinst prerm postrm; do
  check "maintainer script $s is valid sh" sh -n "$WORK/control/$s"
done
check "prerm stops both units on remove" grep -q "stop 'harrier.service' 'harrier-bypass.service'" \
  "$WORK/control/prerm"
check "the library symlink resolves to the installed file" \
  test "$(readlink -f "$ROOT/usr/lib/libharrier-bypass.so")" = "$(readlink -f "$ROOT/usr/lib/harrier/libharrier-bypass.so")"
check "usr/lib/harrier/falco/falco is the harrier binary (Falco's command line)" \
  test "$(readlink -f "$ROOT/usr/lib/harrier/falco/falco")" = "$ROOT/usr/bin/harrier"
check "the binary is stripped" sh -c "! file -L '$ROOT/usr/bin/harrier' | grep -q 'not stripped'"

out=$("$ROOT/usr/bin/harrier" --version 2>&1)
if [[ $out == "harrier $VERSION" ]]; then ok "installed harrier --version: $out"; else fail "installed harrier --version printed '$out'"; fi
if "$ROOT/usr/bin/harrier" --help | grep -q gen-docs; then fail "hidden gen-docs shows in --help"; else ok "gen-docs is hidden"; fi
if grep -q gen-docs "$ROOT/usr/share/bash-completion/completions/harrier"; then
  fail "completions offer the hidden gen-docs"
else ok "completions leave out gen-docs"; fi
check "bash completion offers capture and bypass" bash -c "
  source '$ROOT/usr/share/bash-completion/completions/harrier'
  COMP_WORDS=(harrier ''); COMP_CWORD=1; _harrier harrier '' harrier
  [[ \" \${COMPREPLY[*]} \" == *' capture '* && \" \${COMPREPLY[*]} \" == *' bypass '* ]]"

# The library from its installed path (and through the symlink): it loads, and
# since no bypass service is attached to this file (a fresh inode), getpid()
# falls back to the real syscall and returns the right pid.
for lib in usr/lib/harrier/libharrier-bypass.so usr/lib/libharrier-bypass.so; do
  check "LD_PRELOAD=/$lib /bin/true" env LD_PRELOAD="$ROOT/$lib" /bin/true
  out=$(HARRIER_BYPASS_LOG=info LD_PRELOAD="$ROOT/$lib" /usr/bin/python3 -c 'import os; print(os.getpid())' 2>&1)
  pid=$(sed -n 1p <<<"$out")
  if grep -q "^harrier-bypass\[$pid\]: " <<<"$out" &&
    grep -Eq '^harrier-bypass: getpid +bypassed 0 fallback [1-9]' <<<"$out"; then
    ok "/$lib preloaded: getpid() fell back to the syscall (pid $pid)"
  else
    fail "/$lib preloaded: expected a fallback getpid() report"; sed 's/^/    /' <<<"$out" >&2
  fi
done
if HARRIER_BYPASS_LOG=info /usr/bin/python3 -c 'import os' 2>&1 | grep -q harrier-bypass; then
  fail "a bypass report without the library: the check above proves nothing"
else ok "no bypass report without LD_PRELOAD"; fi

# ---- systemd units. verify looks for ExecStart's binary on this machine, so
# each unit is checked from a copy whose paths point into the scratch root.
# verify exits 0 on unknown keys and bad values (it only logs "ignoring"), so
# any output at all is a failure.
verify_unit() {
  local out
  out=$(systemd-analyze verify --man=no "$1" 2>&1) && [[ -z $out ]] || { echo "$out"; return 1; }
}
mkdir -p "$WORK/units"
for u in harrier harrier-bypass; do
  sed -e "s|/usr/bin/harrier|$ROOT/usr/bin/harrier|g" -e "s|/usr/lib/harrier/|$ROOT/usr/lib/harrier/|g" \
    "$ROOT/lib/systemd/system/$u.service" > "$WORK/units/$u.service"
  check "systemd-analyze verify $u.service" verify_unit "$WORK/units/$u.service"
done
check "harrier.service runs harrier run --config /etc/harrier/harrier.yaml" \
  grep -qx 'ExecStart=/usr/bin/harrier run --config /etc/harrier/harrier.yaml' "$ROOT/lib/systemd/system/harrier.service"
check "harrier-bypass.service attaches to the installed library" \
  grep -qx 'ExecStart=/usr/bin/harrier bypass start --lib /usr/lib/harrier/libharrier-bypass.so' \
  "$ROOT/lib/systemd/system/harrier-bypass.service"
for bad in 's/^Restart=on-failure/Restart=sometimes/' 's/^Restart=/Restrat=/' 's|^ExecStart=[^ ]*|ExecStart=/nonexistent/harrier|'; do
  sed "$bad" "$WORK/units/harrier.service" > "$WORK/units/broken.service"
  if verify_unit "$WORK/units/broken.service" >/dev/null; then
    fail "systemd-analyze verify accepted a unit changed by sed '$bad'"
  else ok "systemd-analyze verify rejects a unit changed by sed '$bad'"; fi
done
# The unit's flags against the binary's, once `harrier run` exists in it.
if "$ROOT/usr/bin/harrier" run --help >"$WORK/run-help" 2>&1; then
  check "harrier run takes --config (harrier.service)" grep -q -- --config "$WORK/run-help"
  check "harrier run takes --metrics-addr (the DaemonSet)" grep -q -- --metrics-addr "$WORK/run-help"
else
  echo "note: this harrier has no 'run' subcommand yet; ExecStart's flags not checked against it"
fi
RULES_SRC=crates/harrier-rules/rules/harrier_rules.yaml
if [[ -f $RULES_SRC ]]; then
  check "the package's default rules are $RULES_SRC" cmp "$RULES_SRC" "$ROOT/usr/share/harrier/rules/harrier_rules.yaml"
else
  fail "$RULES_SRC is missing: the package holds a placeholder"
fi
check "harrier.yaml names the installed rules" grep -q '^  - /usr/share/harrier/rules/harrier_rules.yaml$' \
  "$ROOT/etc/harrier/harrier.yaml"
check "harrier.yaml is YAML with the falco-style keys" "$KV_BIN/python" -c '
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
for k in ("rules_files", "priority", "json_output", "stdout_output", "file_output", "http_output", "metrics"):
    assert k in c, k
assert c["file_output"]["filename"] and c["http_output"]["url"]' "$ROOT/etc/harrier/harrier.yaml"

# ---- lintian: no errors (warnings are printed)
if out=$(lintian --fail-on error "$DEB" 2>&1); then
  ok "lintian: no errors"
else
  fail "lintian"
fi
grep -E '^[EW]: ' <<<"$out" | sed 's/^/    /'

# ---- make install: same tree as the package with the package's layout
list() { (cd "$1" && find . \( -type f -o -type l \) ! -path './usr/share/doc/*' | sort); }
DEST=$WORK/install-usr
make --no-print-directory -s install INSTALL_NEEDS= DESTDIR="$DEST" \
  PREFIX=/usr UNITDIR=/lib/systemd/system ZSHCOMPDIR=/usr/share/zsh/vendor-completions >/dev/null
if diff <(list "$ROOT") <(list "$DEST") >"$WORK/diff"; then
  ok "make install PREFIX=/usr lays out the package's tree ($(list "$DEST" | wc -l) files)"
else
  fail "make install PREFIX=/usr differs from the package (< package, > install)"; sed 's/^/    /' "$WORK/diff" >&2
fi
check "make install dir etc/harrier/rules.d" test -d "$DEST/etc/harrier/rules.d"

DEST=$WORK/install-local
make --no-print-directory -s install INSTALL_NEEDS= DESTDIR="$DEST" >/dev/null
check "make install defaults to /usr/local" test -x "$DEST/usr/local/bin/harrier" \
  -a -f "$DEST/usr/local/lib/harrier/libharrier-bypass.so" -a -f "$DEST/usr/local/lib/systemd/system/harrier.service" \
  -a -f "$DEST/usr/local/share/zsh/site-functions/_harrier" -a -f "$DEST/etc/harrier/harrier.yaml"
check "/usr/local/lib/libharrier-bypass.so is a symlink to the installed file" \
  test "$(readlink "$DEST/usr/local/lib/libharrier-bypass.so")" = harrier/libharrier-bypass.so
check "/usr/local units and config use /usr/local paths" grep -q '^ExecStart=/usr/local/bin/harrier bypass start --lib /usr/local/lib/harrier/libharrier-bypass.so$' \
  "$DEST/usr/local/lib/systemd/system/harrier-bypass.service"
check "/usr/local config names /usr/local rules" grep -q '/usr/local/share/harrier/rules/harrier_rules.yaml' \
  "$DEST/etc/harrier/harrier.yaml"
echo "# edited by the admin" >> "$DEST/etc/harrier/harrier.yaml"
make --no-print-directory -s install INSTALL_NEEDS= DESTDIR="$DEST" >/dev/null
check "reinstall keeps an edited harrier.yaml" grep -q '^# edited by the admin$' "$DEST/etc/harrier/harrier.yaml"
make --no-print-directory -s uninstall DESTDIR="$DEST" >/dev/null
left=$(cd "$DEST" && find . \( -type f -o -type l \) | sort | tr '\n' ' ')
if [[ $left == "./etc/harrier/harrier.yaml " ]]; then ok "make uninstall leaves only /etc/harrier"; else fail "make uninstall left: $left"; fi

# ---- Kubernetes
K8S=deploy/kubernetes/harrier-daemonset.yaml
check "kubernetes-validate --strict $K8S" "$KV_BIN/kubernetes-validate" --strict --quiet "$K8S"
sed 's/hostPID: true/hostPid: true/' "$K8S" > "$WORK/broken-daemonset.yaml"
if "$KV_BIN/kubernetes-validate" --strict --quiet "$WORK/broken-daemonset.yaml" >/dev/null 2>&1; then
  fail "kubernetes-validate accepted a misspelled field"
else ok "kubernetes-validate rejects a misspelled field"; fi
check "DaemonSet's config has the package config's keys" "$KV_BIN/python" -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap")
k8s = yaml.safe_load(cm["data"]["harrier.yaml"])
pkg = yaml.safe_load(open(sys.argv[2]))
assert sorted(k8s) == sorted(pkg), (sorted(k8s), sorted(pkg))
ds = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]
assert ds["metadata"]["annotations"]["prometheus.io/port"] == k8s["metrics"]["listen_address"].rsplit(":", 1)[1]' \
  "$K8S" "$ROOT/etc/harrier/harrier.yaml"

echo "test-packaging: $passed passed, $failed failed"
echo "$passed passed, $failed failed"
((failed == 0))
