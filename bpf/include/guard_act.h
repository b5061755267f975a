/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The guard around its interpreter: what a handler calls (hr_guard: the
 * quick test and the scratch; hr_guard_finish: the tail call into the
 * guard's own program, hr_guard_run) and what a verdict does (the log user
 * space reads, the rate limit, holding or killing the task). Part of
 * guard.h (included from it: it uses the layouts, maps and interpreter there).
 */
#ifndef HARRIER_GUARD_ACT_H
#define HARRIER_GUARD_ACT_H

static __always_inline void hr_g_note(__u32 rule, __u32 outcome, __u64 ts, __s32 err)
{
	struct hr_g_stats *st = bpf_map_lookup_elem(&guard_stats, &rule);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct hr_g_log log = {
		.ts = ts, .acted_ns = bpf_ktime_get_ns(), .rule = rule, .outcome = outcome, .err = err,
	};

	if (st && outcome < HR_GO_MAX)
		__sync_fetch_and_add(&st->n[outcome], 1);
	bpf_map_update_elem(&guard_log, &tid, &log, BPF_ANY);
}

/* Within the rule's rate: one window per second, shared by all CPUs. */
static __always_inline bool hr_g_rate_ok(__u32 rule, __u64 now)
{
	struct hr_g_rate *r = bpf_map_lookup_elem(&guard_rates, &rule);
	__u64 sec = now / 1000000000ULL;

	if (!r)
		return false;
	if (r->window != sec) {
		r->window = sec;
		r->count = 0;
	}
	return __sync_fetch_and_add(&r->count, 1) < guard_rate;
}

static __always_inline bool hr_g_protected(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return tgid <= 1 || tgid == guard_self_tgid || (BPF_CORE_READ(t, flags) & HR_PF_KTHREAD);
}

/* Stops the task for user space's verdict; no room to note it: not held. */
static __always_inline void hr_g_hold(__u32 rule, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct hr_g_held h = { .ts = ts, .tgid = id >> 32, .rule = rule };

	if (hr_g_protected() || bpf_map_update_elem(&guard_held, &tid, &h, BPF_ANY)) {
		hr_g_note(rule, HR_GO_DEFERRED, ts, 0);
		return;
	}
	if (bpf_send_signal(HR_SIGSTOP)) {
		bpf_map_delete_elem(&guard_held, &tid);
		hr_g_note(rule, HR_GO_DEFERRED, ts, 0);
		return;
	}
	hr_g_note(rule, HR_GO_HELD, ts, 0);
}

static __always_inline void hr_g_kill(__u32 rule, __u64 ts)
{
	long err;

	if (hr_g_protected()) {
		hr_g_note(rule, HR_GO_PROTECTED, ts, 0);
		return;
	}
	if (!hr_g_rate_ok(rule, ts)) {
		hr_g_note(rule, HR_GO_LIMITED, ts, 0);
		return;
	}
	/* The process gets SIGKILL on its way back to user space: it runs no
	 * instruction after this syscall. */
	err = bpf_send_signal(HR_SIGKILL);
	hr_g_note(rule, err ? HR_GO_FAILED : HR_GO_KILLED, ts, err);
}

/* argv[0] and the rest (NULs as spaces), from the new image's memory: a
 * full buffer may have cut them, then they match prefixes only. */
static __always_inline void hr_g_read_argv(struct hr_g_scratch *s)
{
	struct task_struct *t = bpf_get_current_task_btf();
	unsigned long at = BPF_CORE_READ(t, mm, arg_start);
	unsigned long end = BPF_CORE_READ(t, mm, arg_end);
	long n, m;

	__builtin_memset(s->exe, 0, HR_G_STR);
	__builtin_memset(s->args, 0, HR_G_STR);
	n = bpf_probe_read_user_str(s->exe, HR_G_STR, (const void *)at);
	if (n <= 0)
		return;
	s->exe_len = n < HR_G_STR ? n - 1 : HR_G_STR;
	if (n >= HR_G_STR)
		return;
	at += n;
	m = end > at ? end - at : 0;
	if (m > HR_G_STR - 1)
		m = HR_G_STR - 1;
	if (m && bpf_probe_read_user(s->args, m & (HR_G_STR - 1), (const void *)at))
		return;
	/* The last NUL ends the string; those before it separate arguments. */
	for (__u32 i = 0; i < HR_G_STR - 1; i++) {
		if (i + 1 >= m)
			break;
		if (!s->args[i])
			s->args[i] = ' ';
	}
	/* 127 bytes with no end: cut, prefixes only. */
	s->args_len = m == HR_G_STR - 1 && s->args[m - 1] ? HR_G_STR : (m ? m - 1 : 0);
}

/* The guard's own program, a tail call from the capture handler once its
 * record is published: the capture programs carry none of this code, so a
 * kernel that verifies every global function eagerly (6.1: the capture
 * programs each verified it again, minutes under emulation) loads them as
 * fast as without enforcement, and this is verified once per program type. */
static __always_inline int hr_guard_run(void)
{
	struct hr_g_run run = { .verdict = HR_G_NOMATCH };
	struct hr_g_scratch *s;
	__u32 zero = 0, nr;

	s = bpf_map_lookup_elem(&guard_scratch, &zero);
	if (!s)
		return 0;
	run.slot = s->slot;
	run.ev = s->ev;
	run.ts = s->ts;
	nr = s->nr;
	run.p = bpf_map_lookup_elem(&guard_progs, &run.slot);
	if (!run.p)
		return 0;
	run.s = s;
	s->exe_len = -1;
	s->args_len = -1;
	if ((nr == 59 || nr == 322) && s->ret >= 0)
		hr_g_read_argv(s);
	/* Each instruction is one step, a substring search one per start
	 * position: the loop ends at the verdict, long before this bound. */
	bpf_loop(HR_G_INS * (HR_G_STR + 1), hr_g_step, &run, 0);
	if (run.verdict != HR_G_NOMATCH && (run.verdict & HR_G_KILL))
		hr_g_kill(run.verdict & ~HR_G_KILL & (HR_G_RULES - 1), run.ts);
	/* A failed call gave the task nothing to use: no need to stop it. */
	else if (run.deferred && guard_hold && s->ret >= 0)
		hr_g_hold(run.deferred - 1, run.ts);
	else if (run.deferred)
		hr_g_note(run.deferred - 1, HR_GO_DEFERRED, run.ts, 0);
	return 0;
}

/* Whether the event passes the program's atoms (flags: the call's). */
static __always_inline bool hr_g_quick(const struct hr_g_prog *p, struct hr_em *em, __u32 path_off, __u32 flags)
{
	/* The path's length and first bytes, read at once. */
	struct {
		__u16 len;
		__u8 head[8];
	} __attribute__((packed)) at = { .len = HR_VAR_ABSENT };
	bool path = false;
	__u64 head = 0;

	if (!p->quick_n)
		return true;
	if (path_off && em->ret >= 0) {
		bpf_probe_read_kernel(&at, sizeof(at), em->ev + (path_off & 0x3fff));
		path = at.len != HR_VAR_ABSENT;
		__builtin_memcpy(&head, at.head, 8);
		/* What follows a short path is the record's next bytes: as NULs. */
		if (at.len < 8)
			head &= (1ULL << (8 * at.len)) - 1;
	}
	for (__u32 i = 0; i < HR_G_QUICK; i++) {
		const struct hr_g_atom *a = &p->quick[i];

		if (i >= p->quick_n)
			break;
		if (a->kind == HR_GQ_HEAD ? path && (head & a->mask) == a->value : (flags & a->mask) == a->value)
			return true;
	}
	return false;
}

/* What the guard program of syscall nr reads of the written event (path_off:
 * its kernel-resolved path, 0: none; fixed: the size of a fixed-size record,
 * 0: variable), in the per-CPU scratch. An unguarded syscall costs a lookup,
 * an event the quick test rejects two and a few loads. */
static __always_inline void hr_guard(struct hr_em *em, __u32 nr, __u32 path_off, const __u32 fixed)
{
	struct hr_g_scratch *s;
	struct hr_g_prog *p;
	__u32 zero = 0, *slot, sl, flags = 0;
	__u16 len = HR_VAR_ABSENT;

	if (!guard_enabled || nr >= HR_NR_SLOTS)
		return;
	slot = bpf_map_lookup_elem(&guard_index, &nr);
	if (!slot || !*slot)
		return;
	sl = *slot - 1;
	p = bpf_map_lookup_elem(&guard_progs, &sl);
	/* A failed call the program cannot act on costs no read. */
	if (!p || (p->quick_ok && em->ret < 0))
		return;
	if (p->flags_off)
		bpf_probe_read_kernel(&flags, 4, em->ev + (p->flags_off & 255));
	if (!hr_g_quick(p, em, path_off, flags))
		return;
	s = bpf_map_lookup_elem(&guard_scratch, &zero);
	if (!s)
		return;
	s->ret = em->ret;
	s->flags = flags;
	s->path_len = -1;
	if (path_off && em->ret >= 0) {
		bpf_probe_read_kernel(&len, 2, em->ev + (path_off & 0x3fff));
		if (len != HR_VAR_ABSENT) {
			__u64 n = len;

			/* In asm: a compare's bound is lost on 6.1 where clang
			 * reloads n from a spill made before it. */
			hr_clamp(n, HR_G_STR);
			/* Past its NUL the trie compares nothing: no need to clear. */
			bpf_probe_read_kernel(s->path, n, em->ev + (path_off & 0x3fff) + 2);
			if (n < HR_G_STR)
				s->path[n & (HR_G_STR - 1)] = 0;
			s->path_len = len;
		}
	}
	s->slot = sl;
	s->nr = nr;
	s->ts = hr_stamp(em->ev);
	/* The address goes as a scalar, read as one. Once published, a shared
	 * ring's record may be consumed and its room reused by another CPU
	 * before the guard reads it: the guard gets a copy. (A per-CPU ring's
	 * room is reused only by this CPU; a variable record of a shared ring
	 * is written in per-CPU scratch.) */
	if (shared_rings && fixed) {
		void *copy = s->rec;

		bpf_probe_read_kernel(s->rec, fixed < HR_G_REC ? fixed : HR_G_REC, em->ev);
		bpf_probe_read_kernel(&s->ev, sizeof(s->ev), &copy);
	} else {
		bpf_probe_read_kernel(&s->ev, sizeof(s->ev), &em->ev);
	}
	s->pending = 1;
}

/* After the handler published its event: the guard program, if the event
 * awaits it (tails: this program type's array; 0: a handler the guard does
 * not run on). */
static __always_inline void hr_guard_finish(void *ctx, void *tails)
{
	struct hr_g_scratch *s;
	__u32 zero = 0;

	if (!guard_enabled)
		return;
	s = bpf_map_lookup_elem(&guard_scratch, &zero);
	if (!s || !s->pending)
		return;
	s->pending = 0;
	if (tails)
		bpf_tail_call(ctx, tails, 0);
}

#endif
