#!/usr/bin/env bash
# Debian 12's sysdig 0.29, unpacked (not installed) under /opt/harrier-sysdig: the
# reference reader of legacy .scap files for crates/harrier-scap's tests. It reads
# capture files offline, so no kernel module is needed. `dpkg -x` puts each .deb's
# files in the directory and touches nothing else on the system. Idempotent:
# nothing is done when the wrapper already runs. Called by scripts/deps.sh.
set -euo pipefail

DIR=/opt/harrier-sysdig
WRAP="$DIR/sysdig"
# sysdig and the libraries `ldd` finds missing on a fresh Debian 12.
DEBS=(sysdig libfalcosecurity0 libb64-0d libc-ares2 libgrpc++1.51 libgrpc29
	libluajit-5.1-2 libprotobuf32 libyaml-cpp0.7 libtbb12 libre2-9 libjsoncpp25)

if [ -x "$WRAP" ] && "$WRAP" --version >/dev/null 2>&1; then
	exit 0
fi
echo "deps-sysdig: unpacking ${DEBS[*]} into $DIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "${DEBS[@]}" 2>/dev/null) || {
	apt-get update -qq
	(cd "$tmp" && apt-get download -qq "${DEBS[@]}")
}
rm -rf "$DIR.new"
mkdir -p "$DIR.new/root"
for deb in "$tmp"/*.deb; do
	dpkg -x "$deb" "$DIR.new/root"
done
libs="$DIR/root/usr/lib/x86_64-linux-gnu:$DIR/root/lib/x86_64-linux-gnu:$DIR/root/usr/lib"
cat >"$DIR.new/sysdig" <<WRAPPER
#!/bin/sh
# Runs the unpacked sysdig with its unpacked libraries (scripts/deps-sysdig.sh).
export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$DIR/root/usr/bin/sysdig" "\$@"
WRAPPER
chmod +x "$DIR.new/sysdig"
rm -rf "$DIR"
mv "$DIR.new" "$DIR"
missing=$(LD_LIBRARY_PATH="$libs" ldd "$DIR/root/usr/bin/sysdig" | grep "not found" || true)
if [ -n "$missing" ]; then
	echo "deps-sysdig: libraries still missing:" >&2
	echo "$missing" >&2
	exit 1
fi
"$WRAP" --version
