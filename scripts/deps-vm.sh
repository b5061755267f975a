#!/usr/bin/env bash
# What scripts/test-kernels.sh needs to boot Debian 12's 6.1 kernel in qemu,
# skipping what is already there (called by scripts/deps.sh; run as root):
#   - qemu-system-x86, and busybox-static (virtme-ng's initramfs for modular kernels)
#   - the newest linux-image-6.1.0-N-amd64: only its files in /boot and its
#     modules are used. It is never booted on the host: these machines boot
#     their kernel directly, with no boot loader to reconfigure (installing it
#     only adds /boot files, an initrd and the /vmlinuz symlinks).
#   - virtme-ng, pinned, in its own venv at /opt/harrier-vng (Debian's python3).
set -euo pipefail

VNG_VERSION=1.42
VENV=/opt/harrier-vng
export DEBIAN_FRONTEND=noninteractive
apt_install() {
	# Another apt may hold the lock for a while on a shared machine: wait for it.
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

missing=()
for p in qemu-system-x86 busybox-static python3-venv; do
	installed "$p" || missing+=("$p")
done
kernel=$(ls -d /lib/modules/6.1.0-*-amd64 2>/dev/null | sort -V | tail -1 || true)
updated=
if [ -z "$kernel" ] || [ ! -e "/boot/vmlinuz-$(basename "$kernel")" ]; then
	apt-get update -qq && updated=1
	# The newest ABI of Debian 12's 6.1 (signed image; -unsigned, -cloud, -rt and -dbg excluded).
	pkg=$(apt-cache pkgnames linux-image-6.1.0- | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -1)
	[ -n "$pkg" ] || { echo "deps-vm: no linux-image-6.1.0-N-amd64 in apt" >&2; exit 1; }
	missing+=("$pkg")
fi
if ((${#missing[@]})); then
	echo "deps-vm: installing ${missing[*]}"
	[ -n "$updated" ] || apt-get update -qq
	apt_install "${missing[@]}"
fi

if [ "$("$VENV/bin/vng" --version 2>/dev/null | awk '{ print $NF }')" != "$VNG_VERSION" ]; then
	echo "deps-vm: installing virtme-ng $VNG_VERSION in $VENV"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VNG_VERSION"
fi
