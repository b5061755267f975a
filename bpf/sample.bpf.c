// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Counts the machine's syscalls by number for a moment, so that
 * `--attach auto` can tell how much of the load a selection covers
 * (crates/harrier-capture/src/attach.rs). Attached for ~0.2 s, then gone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "harrier.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 self_tgid = 0;	/* the sensor's own calls do not count */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HR_NR_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(hr_sample, struct pt_regs *regs, long id)
{
	__u32 nr = id;
	__u64 *c;

	if (bpf_get_current_pid_tgid() >> 32 == self_tgid)
		return 0;
	c = bpf_map_lookup_elem(&counts, &nr);
	if (c)
		(*c)++;
	return 0;
}
