#!/usr/bin/env bash
# Dumps the running kernel's BTF as C, for CO-RE builds. The committed file
# came from the kernel named in bpf/vmlinux/KERNEL; CO-RE relocates field
# offsets at load time, so it serves other kernels too.
set -euo pipefail
cd "$(dirname "$0")/.."
bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux/vmlinux.h
uname -r > bpf/vmlinux/KERNEL
echo "bpf/vmlinux/vmlinux.h regenerated from $(uname -r)"
