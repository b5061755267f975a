#!/usr/bin/env bash
# What scripts/test-kernels.sh needs to boot Debian 12's kernels in qemu,
# skipping what is already there (called by scripts/deps.sh; run as root):
#   - qemu-system-x86, and busybox-static (virtme-ng's initramfs for modular kernels)
#   - the newest linux-image-6.1.0-N-amd64 (bookworm), and Debian's 6.12 for
#     bookworm, pinned: linux-image-6.12.N+deb12-amd64 comes from the security
#     suite (bookworm-security, in every Debian 12's default sources). Only
#     their files in /boot and their modules are used. They are never booted on
#     the host: these machines boot their kernel directly, with no boot loader
#     to reconfigure (installing one only adds /boot files, an initrd and the
#     /vmlinuz symlinks).
#   - virtme-ng, pinned, in its own venv at /opt/harrier-vng (Debian's python3).
set -euo pipefail

VNG_VERSION=1.42
# Bump both together (apt-cache policy 'linux-image-6.12.*+deb12-amd64').
K612_PACKAGE=linux-image-6.12.117+deb12-amd64
K612_VERSION=6.12.117-1~deb12u1
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
if [ "$(dpkg-query -W -f='${Version}' "$K612_PACKAGE" 2>/dev/null)" != "$K612_VERSION" ]; then
	[ -n "$updated" ] || { apt-get update -qq && updated=1; }
	apt-cache madison "$K612_PACKAGE" | grep -F "| $K612_VERSION |" >/dev/null || {
		echo "deps-vm: $K612_PACKAGE $K612_VERSION is not in apt's sources (Debian 12 has it from bookworm-security; if the archive dropped it, pin a newer one in $0)" >&2
		exit 1
	}
	missing+=("$K612_PACKAGE=$K612_VERSION")
fi
if ((${#missing[@]})); then
	echo "deps-vm: installing ${missing[*]}"
	[ -n "$updated" ] || apt-get update -qq
	# INITRD=No: no initramfs for these kernels (virtme-ng boots them with
	# its own), ~25 CPU-s each saved.
	INITRD=No apt_install "${missing[@]}"
fi

if [ "$("$VENV/bin/vng" --version 2>/dev/null | awk '{ print $NF }')" != "$VNG_VERSION" ]; then
	echo "deps-vm: installing virtme-ng $VNG_VERSION in $VENV"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VNG_VERSION"
fi
