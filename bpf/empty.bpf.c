// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of Harrier's attach plan (`harrier run --empty-programs`,
 * crates/harrier-capture/src/empty.rs): wherever the session would link one
 * of its programs, one of these, of the same program type, is linked
 * instead. They return at once, so what remains is the cost of being
 * attached there at all (the kernel's slow syscall path, the tracepoint or
 * tp_btf call).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tracepoint")
int hr_empty_tp(void *ctx)
{
	return 0;
}

/* The attach target is set per link before load (one object per target). */
SEC("tp_btf")
int hr_empty_btf(void *ctx)
{
	return 0;
}

SEC("raw_tp")
int hr_empty_raw(void *ctx)
{
	return 0;
}
