/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Enforcement at the syscall's exit: the kernel decides what it can of an
 * enforced rule, and kills the process before it returns to user space.
 *
 * User space compiles each enforced rule's condition, per syscall, into a
 * jump program (crates/harrier-engine/src/guard.rs): every instruction
 * tests one thing the kernel knows (the call succeeded, open flags, the
 * kernel-resolved path or its directory, the process name, an ancestor's
 * name, argv[0] at exec, the uid, a host cgroup) and jumps on. A term the
 * kernel cannot know ends the rule as deferred: user space decides it after
 * the full evaluation. Jumps only go forward, so a program ends within its
 * length. Strings are tested by set membership in one LPM trie: an exact
 * entry covers its NUL, a prefix entry does not; in a directory set (the
 * instruction's b) an entry "D/" matches a path when no '/' follows it,
 * and its value is its length.
 * Layouts are mirrored in crates/harrier-capture/src/guard.rs.
 */
#ifndef HARRIER_GUARD_H
#define HARRIER_GUARD_H

#define HR_G_INS	128	/* instructions per syscall's program */
#define HR_G_PROGS	32	/* syscalls with a program */
#define HR_G_RULES	64	/* enforced rules */
#define HR_G_STR	128	/* string bytes a set entry may have */
#define HR_G_NEEDLES	64	/* substrings the programs search for */
#define HR_G_NEEDLE	32	/* bytes a substring may have */
#define HR_G_REC	128	/* bytes of a fixed-size record (the largest: 72) */
#define HR_G_QUICK	8	/* atoms of a program's quick test */

#define HR_G_NOMATCH	0xffff	/* no rule matched */
#define HR_G_KILL	0x8000	/* | rule: kill */


#define HR_PF_KTHREAD	0x00200000
#define HR_SIGKILL	9
#define HR_SIGSTOP	19

enum hr_g_op {
	HR_G_SUCCESS = 1,	/* ret >= 0 */
	HR_G_FLAGS,		/* (flags & b) == c */
	HR_G_STR_IN,		/* string of src in set a */
	HR_G_HOSTCG,		/* the task's cgroup is a host (non-container) cgroup */
	HR_G_DEFER,		/* rule a needs user space: note it, jump to t */
	HR_G_NUM,		/* (u32 at record offset a & b) == c */
	HR_G_SUBSTR,		/* string of src holds needle a (b: enum hr_g_mode) */
	HR_G_WHOLE,		/* string of src is absent or was not cut to HR_G_STR */
	HR_G_AGE,		/* the process is older than (b << 32 | c) ns */
};

enum hr_g_mode {
	HR_GM_CONTAINS = 0,
	HR_GM_ICONTAINS,	/* ASCII case folded; the needle is stored folded */
	HR_GM_ENDSWITH,
};

enum hr_g_src {
	HR_GS_PATH = 1,		/* the event's kernel-resolved path */
	HR_GS_COMM,		/* the thread's name */
	HR_GS_ANC,		/* ancestor `depth`'s (1: the parent) process name */
	HR_GS_EXE,		/* argv[0] (execve/execveat exits only) */
	HR_GS_UID,		/* the effective uid (user.uid), 4 bytes */
	HR_GS_ARGS,		/* argv[1..] joined by spaces (execve/execveat exits only) */
	HR_GS_PARAM,		/* the record's variable parameter `depth` (c: where the first is), to its NUL */
};

struct hr_g_ins {
	__u8 op;
	__u8 src;
	__u8 depth;
	__u8 pad;
	__u16 t, f;		/* next pc when true / false, or a verdict */
	__u32 a, b, c;
};

enum hr_g_atom_kind {
	HR_GQ_HEAD = 1,		/* (the path's first 8 bytes, NULs past its end & mask) == value */
	HR_GQ_FLAGS,		/* (flags & mask) == value */
};

struct hr_g_atom {
	__u64 mask, value;
	__u32 kind;
	__u32 pad;
};

/* The quick test: a condition every event the program can act on meets
 * (derived from its rules), made in the capture handler, so that most
 * events never reach the guard program (no copies, no tail call).
 * quick_ok: only a call that succeeded goes on; then, if quick_n, one atom
 * must hold. */
struct hr_g_prog {
	__u16 n;
	__u16 flags_off;	/* record offset of the u32 flags parameter, 0: none */
	__u8 quick_ok;
	__u8 quick_n;
	__u16 pad;
	struct hr_g_atom quick[HR_G_QUICK];
	struct hr_g_ins ins[HR_G_INS];
};

struct hr_g_key {
	__u32 prefixlen;
	__u32 set;
	__u8 s[HR_G_STR];
};

/* A substring to search for: user space fills the table before attach. */
struct hr_g_needle {
	__u32 len;
	__u8 s[HR_G_NEEDLE];
};

/* What the last action on a thread was, for user space to report. */
struct hr_g_log {
	__u64 ts;		/* the event's timestamp */
	__u64 acted_ns;		/* when the signal was sent */
	__u16 rule;
	__u8 outcome;		/* enum hr_g_outcome */
	__u8 pad;
	__s32 err;		/* bpf_send_signal's result */
};

enum hr_g_outcome {
	HR_GO_KILLED = 1,
	HR_GO_FAILED,
	HR_GO_LIMITED,		/* over the rule's rate */
	HR_GO_PROTECTED,	/* pid 1, a kernel thread, the sensor */
	HR_GO_DEFERRED,		/* a term only user space knows */
	HR_GO_HELD,		/* deferred, and stopped until user space decides */
	HR_GO_MAX,
};

struct hr_g_stats {
	__u64 n[HR_GO_MAX];
};

struct hr_g_rate {
	__u64 window;		/* second of the current window */
	__u64 count;
};

/* Per evaluation, one per CPU: the strings the program reads, built once. */
struct hr_g_scratch {
	struct hr_g_key k;
	__u8 path[HR_G_STR];
	__u8 exe[HR_G_STR];
	__u8 args[HR_G_STR];
	__s32 path_len;		/* -1: no path */
	__s32 exe_len;		/* -1: none */
	__s32 args_len;		/* -1: none */
	__s64 ret;
	__u32 flags;
	__u32 hay;		/* HR_G_SUBSTR: the loaded string's length */
	/* Handed from the capture handler to the guard's tail program. */
	__u64 ev;		/* the record's address (or rec's), read with probe reads */
	__u64 ts;		/* the event's timestamp */
	__u32 slot;
	__u32 nr;
	__u32 pending;		/* an event awaits the guard program */
	__u32 pad;
	__u8 rec[HR_G_REC];	/* a fixed record from a shared ring: its copy */
};

const volatile bool guard_enabled = 0;
const volatile __u32 guard_self_tgid = 0;
const volatile __u32 guard_rate = 100;	/* kills per rule per second */
/* A deferred kill rule stops the task (SIGSTOP) until user space decides:
 * it kills or resumes it; a guardian process resumes what a dead sensor
 * left held (fail open). */
const volatile bool guard_hold = 0;

/* A held task: user space resolves it once it has judged the event. */
struct hr_g_held {
	__u64 ts;		/* the event's timestamp */
	__u32 tgid;
	__u16 rule;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_NR_SLOTS);
	__type(key, __u32);
	__type(value, __u32);		/* program slot + 1, 0: none */
} guard_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_G_PROGS);
	__type(key, __u32);
	__type(value, struct hr_g_prog);
} guard_progs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct hr_g_key);
	__type(value, __u8);		/* 1, or a directory entry's length */
} guard_strs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_G_NEEDLES);
	__type(key, __u32);
	__type(value, struct hr_g_needle);
} guard_needles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, __u8);
} host_cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct hr_g_log);
} guard_log SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_G_RULES);
	__type(key, __u32);
	__type(value, struct hr_g_stats);
} guard_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);		/* tid */
	__type(value, struct hr_g_held);
} guard_held SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_G_RULES);
	__type(key, __u32);
	__type(value, struct hr_g_rate);
} guard_rates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hr_g_scratch);
} guard_scratch SEC(".maps");

/* The loop's state, on the caller's stack. */
struct hr_g_run {
	struct hr_g_scratch *s;	/* looked up once, not per step */
	struct hr_g_prog *p;
	__u64 ev;		/* the written record's address, read with probe reads */
	__u64 ts;		/* the event's timestamp */
	__u32 slot;
	__u32 pc;
	__u32 verdict;
	__u32 deferred;		/* rule + 1 */
	__u32 scan;		/* HR_G_SUBSTR: the next start position + 1, 0: none yet */
};

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
			__u32 n = len;

			if (n > HR_G_STR)
				n = HR_G_STR;
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
