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

#include "guard_eval.h"
#include "guard_act.h"

#endif
