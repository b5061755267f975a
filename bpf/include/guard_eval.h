/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The guard's interpreter: one instruction of an enforced rule's jump
 * program per bpf_loop step (hr_g_step), the string tests in a global
 * function of their own (hr_g_strop). Part of guard.h (included from it:
 * it uses the layouts and maps there).
 */
#ifndef HARRIER_GUARD_EVAL_H
#define HARRIER_GUARD_EVAL_H

static __always_inline __u32 hr_g_strlen(const __u8 *s, __u32 max)
{
	__u32 n = 0;

	for (__u32 i = 0; i < 16; i++) {
		if (i >= max || !s[i])
			break;
		n++;
	}
	return n;
}

/* The key's bytes for an ancestor's name: parents' thread-group leaders, as
 * user space's ppid chain. 0 when the chain ends first (no value). */
static __always_inline __u32 hr_g_ancestor(struct hr_g_key *k, __u32 depth)
{
	struct task_struct *t = bpf_get_current_task_btf();

	for (__u32 i = 0; i < 8; i++) {
		if (i >= depth)
			break;
		t = BPF_CORE_READ(t, real_parent, group_leader);
		if (!t || BPF_CORE_READ(t, tgid) == 0)
			return 0;
	}
	bpf_probe_read_kernel_str(k->s, 16, t->comm);
	return 1 + hr_g_strlen(k->s, 16);
}

/* Variable parameter `idx` of the record at `ev` (the first at `first`) into
 * the key, up to its NUL: key bytes with the NUL, 0 when absent. */
static __always_inline __u32 hr_g_param(struct hr_g_key *k, __u64 ev, __u32 first, __u32 idx)
{
	__u32 off = first & 0x3fff;
	__u16 len = 0;

	for (__u32 j = 0; j < 8; j++) {
		bpf_probe_read_kernel(&len, 2, (void *)(ev + off));
		if (j >= idx)
			break;
		off = (off + 2 + (len == HR_VAR_ABSENT ? 0 : len)) & 0x3fff;
	}
	if (len == HR_VAR_ABSENT)
		return 0;
	if (len > HR_G_STR - 1)
		len = HR_G_STR - 1;
	bpf_probe_read_kernel(k->s, len & (HR_G_STR - 1), (void *)(ev + off + 2));
	k->s[len & (HR_G_STR - 1)] = 0;
	for (__u32 i = 0; i < HR_G_STR - 1; i++)
		if (i >= len || !k->s[i])
			return i + 1;
	return HR_G_STR;
}

/* The string `ins` names into the key: its bytes, NUL included when it
 * fits (HR_G_STR: cut there); 0 when it has no value. */
static __always_inline __u32 hr_g_load(struct hr_g_scratch *s, const struct hr_g_ins *ins, __u64 ev)
{
	struct hr_g_key *k = &s->k;
	__u32 n = 0;

	switch (ins->src) {
	case HR_GS_PATH:
	case HR_GS_EXE:
	case HR_GS_ARGS: {
		__s32 len = ins->src == HR_GS_PATH ? s->path_len : ins->src == HR_GS_EXE ? s->exe_len : s->args_len;
		const __u8 *from = ins->src == HR_GS_PATH ? s->path : ins->src == HR_GS_EXE ? s->exe : s->args;

		if (len < 0)
			return 0;
		__builtin_memcpy(k->s, from, HR_G_STR);
		n = len < HR_G_STR ? len + 1 : HR_G_STR;
		break;
	}
	case HR_GS_COMM:
		bpf_get_current_comm(k->s, 16);
		n = 1 + hr_g_strlen(k->s, 16);
		break;
	case HR_GS_ANC:
		n = hr_g_ancestor(k, ins->depth);
		break;
	case HR_GS_PARAM:
		n = hr_g_param(k, ev, ins->c, ins->depth);
		break;
	case HR_GS_UID: {
		struct task_struct *t = bpf_get_current_task_btf();
		__u32 uid = BPF_CORE_READ(t, cred, euid.val);

		__builtin_memcpy(k->s, &uid, 4);
		k->s[4] = 0;
		n = 5;
		break;
	}
	}
	return n;
}

/* Whether the string `ins` names is in its set. No value: false. */
static __always_inline int hr_g_str_in(struct hr_g_scratch *s, const struct hr_g_ins *ins, __u64 ev)
{
	struct hr_g_key *k = &s->k;
	__u32 n = hr_g_load(s, ins, ev);
	__u8 *v;

	if (!n)
		return 0;
	k->set = ins->a;
	k->prefixlen = 8 * (4 + n);
	v = bpf_map_lookup_elem(&guard_strs, k);
	if (!v)
		return 0;
	if (!ins->b)
		return 1;
	/* fd.directory is the path up to its last '/': none after "D/". The
	 * longest entry is the one to try (a shorter one leaves more). */
	for (__u32 i = 0; i < HR_G_STR; i++) {
		if (i >= n || !k->s[i])
			break;
		if (i >= *v && k->s[i] == '/')
			return 0;
	}
	return 1;
}

/* Whether needle nd starts at byte `at` of the loaded string (the scratch
 * key's). Inlined in hr_g_strop, a global function: a frame more would
 * pass 6.1's 512-byte limit on the whole call chain's stack. */
static __always_inline int hr_g_match_at(const struct hr_g_scratch *s, const struct hr_g_needle *nd,
					 __u32 at, bool fold)
{
	for (__u32 j = 0; j < HR_G_NEEDLE; j++) {
		__u8 c;

		if (j >= nd->len)
			break;
		c = s->k.s[(at + j) & (HR_G_STR - 1)];
		if (fold && c >= 'A' && c <= 'Z')
			c |= 0x20;
		if (c != nd->s[j])
			return 0;
	}
	return 1;
}

/* contains, icontains, endswith on the string `ins` names, one start
 * position per step of the program's loop: 1 found, 0 not, 2 + p: go on at
 * position p. No value: false. On a cut string a miss proves nothing: the
 * program tests HR_G_WHOLE. `scan`: 0 at the instruction's first step, else
 * the position + 1. */
static __always_inline int hr_g_substr(struct hr_g_scratch *s, const struct hr_g_ins *ins, __u64 ev, __u32 scan)
{
	struct hr_g_needle *nd;
	__u32 idx = ins->a, at;

	nd = bpf_map_lookup_elem(&guard_needles, &idx);
	if (!nd || !nd->len || nd->len > HR_G_NEEDLE)
		return 0;
	if (!scan) {
		__u32 n = hr_g_load(s, ins, ev);

		if (!n)
			return 0;
		s->hay = n < HR_G_STR ? n - 1 : HR_G_STR;
		if (nd->len > s->hay)
			return 0;
		at = ins->b == HR_GM_ENDSWITH ? s->hay - nd->len : 0;
	} else {
		at = scan - 1;
	}
	if (hr_g_match_at(s, nd, at, ins->b == HR_GM_ICONTAINS))
		return 1;
	if (ins->b == HR_GM_ENDSWITH || at + nd->len >= s->hay)
		return 0;
	return 2 + at + 1;
}

/* The string `ins` names has no value, or all of it is here. */
static __always_inline int hr_g_whole(struct hr_g_scratch *s, const struct hr_g_ins *ins, __u64 ev)
{
	switch (ins->src) {
	case HR_GS_PATH:
		return s->path_len < HR_G_STR;
	case HR_GS_EXE:
		return s->exe_len < HR_G_STR;
	case HR_GS_ARGS:
		return s->args_len < HR_G_STR;
	case HR_GS_PARAM:
		return hr_g_param(&s->k, ev, ins->c, ins->depth) < HR_G_STR;
	default:
		return 1;
	}
}

/* Nanoseconds since the process (its thread-group leader) started. */
static __always_inline __u64 hr_g_age(__u64 ts)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 start = BPF_CORE_READ(t, group_leader, start_time);

	return ts > start ? ts - start : 0;
}

/* The string tests of instruction pc of program slot. A global function,
 * checked once apart from the loop's callback: its loops and lookups would
 * multiply the callback's states, which the verifier explores until they
 * settle. */
__noinline int hr_g_strop(__u32 slot, __u32 pc, __u64 ev, __u32 scan)
{
	struct hr_g_scratch *s;
	struct hr_g_prog *p;
	struct hr_g_ins *ins;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&guard_scratch, &zero);
	p = bpf_map_lookup_elem(&guard_progs, &slot);
	if (!s || !p)
		return 0;
	/* The caller checked pc; the mask is a bound the verifier sees (in
	 * asm: clang drops a C mask the caller's check makes redundant). */
	_Static_assert(HR_G_INS == 128, "the mask below");
	asm volatile("%0 &= 127" : "+r"(pc));
	ins = &p->ins[pc];
	switch (ins->op) {
	case HR_G_STR_IN:
		return hr_g_str_in(s, ins, ev);
	case HR_G_SUBSTR:
		return hr_g_substr(s, ins, ev, scan);
	case HR_G_WHOLE:
		return hr_g_whole(s, ins, ev);
	}
	return 0;
}

static long hr_g_step(__u64 i, void *ctx)
{
	struct hr_g_run *run = ctx;
	__u32 pc = run->pc;
	struct hr_g_scratch *s = run->s;
	struct hr_g_prog *p = run->p;
	const struct hr_g_ins *ins;
	__u64 cg;
	int r;

	if (!s || !p || pc >= HR_G_INS || pc >= p->n)
		return 1;
	ins = &p->ins[pc];
	switch (ins->op) {
	case HR_G_SUCCESS:
		r = s->ret >= 0;
		break;
	case HR_G_FLAGS:
		r = (s->flags & ins->b) == ins->c;
		break;
	case HR_G_STR_IN:
	case HR_G_WHOLE:
		r = hr_g_strop(run->slot, pc, run->ev, 0);
		break;
	case HR_G_NUM: {
		__u32 v = 0;

		bpf_probe_read_kernel(&v, 4, (void *)(run->ev + (ins->a & 0x3fff)));
		r = (v & ins->b) == ins->c;
		break;
	}
	case HR_G_SUBSTR:
		r = hr_g_strop(run->slot, pc, run->ev, run->scan);
		if (r >= 2) {
			/* The same instruction, at the next position. */
			run->scan = r - 1;
			return 0;
		}
		run->scan = 0;
		break;
	case HR_G_AGE:
		r = hr_g_age(run->ts) > ((__u64)ins->b << 32 | ins->c);
		break;
	case HR_G_HOSTCG:
		cg = bpf_get_current_cgroup_id();
		r = bpf_map_lookup_elem(&host_cgroups, &cg) != 0;
		break;
	case HR_G_DEFER:
		if (!run->deferred)
			run->deferred = ins->a + 1;
		r = 1;
		break;
	default:
		return 1;
	}
	pc = r ? ins->t : ins->f;
	if (pc >= HR_G_INS) {
		run->verdict = pc;
		return 1;
	}
	run->pc = pc;
	return 0;
}

#endif
