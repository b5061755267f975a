/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The current task with two plain loads instead of bpf_get_current_task_btf,
 * a call (~13 ns on a kernel with SRSO's safe return and retpolines, once per
 * syscall's exit). x86-64 keeps it in the per-CPU variable current_task:
 * user space finds that variable's address (crates/harrier-capture/src/
 * current.rs, from the verifier's own inlining of bpf_get_smp_processor_id),
 * and each CPU learns its per-CPU offset from cpu_state: its value's address
 * less the map's per-CPU pointer (struct bpf_array's pptrs[0], read as a
 * word: the verifier allows no access past the struct's fixed part).
 *
 * Each CPU's first cur_check_limit reads are compared with the helper's
 * answer; one difference turns this off for every CPU. The task so read is
 * untrusted (bpf_core_cast): field loads are fine, and the few helpers that
 * want a trusted task (task storage, bpf_task_pt_regs) call
 * bpf_get_current_task_btf themselves. Without bpf_rdonly_cast (6.1) the
 * helper is all there is.
 */
#ifndef HARRIER_CURRENT_H
#define HARRIER_CURRENT_H

#define HR_CUR_UNKNOWN	0
#define HR_CUR_ON	1
#define HR_CUR_OFF	2

__u64 cur_slot = 0;	/* current_task's address; 0: the helper (set before attach) */
__u32 cur_state = 0;	/* HR_CUR_*: ON once a CPU's checks passed, OFF after a difference */
__u64 cur_checks = 0;	/* reads compared with the helper, every CPU */
const volatile __u32 cur_check_limit = 16;	/* per CPU */
const volatile __u64 cur_check_skew = 0;	/* tests: makes the comparison fail */

/* The helper's answer, still checking: read the slot too, compare, and turn
 * this CPU on after cur_check_limit agreements (c->cur_on). */
static __always_inline struct task_struct *hr_current_checked(struct hr_cpu *c)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 off, slot = cur_slot;

	if (!slot || cur_state == HR_CUR_OFF || !c)
		return t;
	off = c->cur_off;
	if (!off) {
		/* Through memory, to become numbers: the verifier keeps a
		 * pointer a pointer in registers. */
		c->cur_off = (__u64)c;
		c->cur_seen = (__u64)&cpu_state;
		off = hr_kword(*(volatile __u64 *)&c->cur_seen + bpf_core_field_offset(struct bpf_array, pptrs));
		off = *(volatile __u64 *)&c->cur_off - off;
		c->cur_off = off;
	}
	c->cur_seen = (__u64)t;
	__sync_fetch_and_add(&cur_checks, 1);
	if (hr_kword(slot + off) + cur_check_skew != *(volatile __u64 *)&c->cur_seen) {
		cur_state = HR_CUR_OFF;
		return t;
	}
	if (++c->cur_checked >= cur_check_limit) {
		c->cur_on = 1;
		cur_state = HR_CUR_ON;
	}
	return t;
}

/* The current task: from its per-CPU slot once this CPU is checked, else
 * from the helper. Untrusted either way where bpf_rdonly_cast exists, so
 * that the verifier sees one type on both paths. */
static __always_inline struct task_struct *hr_current(void)
{
	struct hr_cpu *c = HR_CPU_STATE();
	__u64 t;

	if (!hr_has_cast())
		return bpf_get_current_task_btf();
	if (c && c->cur_on && cur_state != HR_CUR_OFF && (t = hr_kword(cur_slot + c->cur_off)))
		return bpf_core_cast((void *)t, struct task_struct);
	return bpf_core_cast(hr_current_checked(c), struct task_struct);
}

#endif
