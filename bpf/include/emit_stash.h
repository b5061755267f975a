/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * TOCTOU: pointer arguments copied at syscall entry into task storage (the
 * stash) and merged into the exit's record, so a thread that rewrites the
 * buffer meanwhile cannot change what the event says. Part of emit.h
 * (included from it: it uses the event writer there).
 */
#ifndef HARRIER_EMIT_STASH_H
#define HARRIER_EMIT_STASH_H

#include "uread.h"

/* Thread tid's stash slot if it holds it; with claim, a free one becomes its
 * own (held until the thread exits: hr_stash_release). */
static __always_inline struct hr_stash *hr_stash_slot(__u32 tid, bool claim)
{
	__u32 i = tid & stash_mask;
	struct hr_stash *s = bpf_map_lookup_elem(&stash_slots, &i);

	if (!s)
		return 0;
	if (s->owner == tid)
		return s;
	if (claim && !s->owner && !__sync_val_compare_and_swap(&s->owner, 0, tid))
		return s;
	return 0;
}

/* The stash of the current thread, tid: its slot, else its task storage
 * (made with `make`, and counted: the slot was another's). */
static __always_inline struct hr_stash *hr_stash_of(__u32 tid, bool make)
{
	struct hr_stash *st = hr_stash_slot(tid, make);
	struct hr_cpu *c;

	if (st)
		return st;
	if (make && (c = hr_cpu_get()))
		c->stats.stash_in_task++;
	return bpf_task_storage_get(&stash, bpf_get_current_task_btf(), 0, make ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* Exiting thread tid leaves its slot. */
static __always_inline void hr_stash_release(__u32 tid)
{
	struct hr_stash *s = hr_stash_slot(tid, false);

	if (s)
		s->owner = 0;
}

/* The current thread's stash, begun for syscall nr; *task: the thread. */
static __always_inline struct hr_stash *hr_stash_begin(__u32 nr, struct task_struct **task)
{
	struct hr_stash *st;
	struct hr_cpu *c;
	__u32 tid = hr_tid(task);

	if (!tid)
		return 0;
	if (step_clock && (c = hr_cpu_get()))
		hr_step_start(c, nr);
	st = hr_stash_of(tid, true);
	if (!st) {
		if ((c = hr_cpu_get()))
			c->stats.stash_fails++;
		return 0;
	}
	st->nr = nr;
	st->path_len = HR_STASH_UNSET;
	st->extra_len = 0;
	st->path_long = 0;
	if (step_clock && (c = hr_cpu_get()))
		hr_step(c, HR_STEP_ENTER_STORE);
	return st;
}

/* An entry handler's copies are done (steps.h). */
static __always_inline void hr_stash_done(void)
{
	struct hr_cpu *c;

	if (step_clock && (c = hr_cpu_get()))
		hr_step_end(c, HR_STEP_ENTER_COPY);
}

/* Where the page-table walk cannot copy it (uread.h), a path shorter than
 * this is copied by the helper to the stack first: hardened usercopy
 * checks a copy's destination, and a slab object (the stash) costs it a slab
 * lookup. The task's stack costs a bounds compare (6.1, 6.12); 6.13+ runs a
 * tracepoint program with a big frame on a per-CPU stack, which skips the
 * slab part only (~20 ns of a ~200 ns copy here). */
#define HR_STASH_QUICK 48

static __always_inline void hr_stash_path(struct hr_stash *st, struct task_struct *task, const void *uptr)
{
	long n = hr_uread_str((__u64 *)st->path, (__u64)uptr, task);
	struct hr_stash_long *lp;

	if (n >= 0) {
		st->path_len = n;
		hr_stash_done();
		return;
	}
	/* Zeroed only here: the walk's copies never need it. */
	__u64 quick[HR_STASH_QUICK / 8] = {};

	n = bpf_probe_read_user_str(quick, sizeof(quick), uptr);
	if (n > 0 && n < HR_STASH_QUICK) {
#pragma unroll
		for (int i = 0; i < HR_STASH_QUICK / 8; i++)
			((__u64 *)st->path)[i] = quick[i];
		st->path_len = n - 1;
		hr_stash_done();
		return;
	}
	n = n < 0 ? -1 : hr_str_len(bpf_probe_read_user_str(st->path, HR_STASH_SHORT, uptr));

	/* Filled to the brim: maybe longer, copied again whole (that copy is the one kept). */
	if (n == HR_STASH_SHORT - 1) {
		lp = bpf_task_storage_get(&stash_long, bpf_get_current_task_btf(), 0,
					  BPF_LOCAL_STORAGE_GET_F_CREATE);
		n = lp ? hr_str_len(bpf_probe_read_user_str(lp->path, HR_PATH_MAX, uptr)) : -1;
		st->path_long = 1;
	}
	st->path_len = n >= 0 ? n : HR_STASH_UNSET;
	hr_stash_done();
}

static __always_inline void hr_stash_extra(struct hr_stash *st, struct task_struct *task, const void *uptr,
					   __u64 len)
{
	if (len > HR_STASH_EXTRA)
		len = HR_STASH_EXTRA;
	if (uptr && len &&
	    (hr_uread_bytes((__u64 *)st->extra, (__u64)uptr, len, task) || !bpf_probe_read_user(st->extra, len, uptr)))
		st->extra_len = len;
	hr_stash_done();
}

/* Whether the pending entry copy belongs to syscall nr (not consumed). */
static __always_inline bool hr_stash_is(__u32 nr)
{
	struct hr_stash *st = hr_stash_of(hr_current()->pid, false);

	return st && st->nr == nr;
}

/* The stash for this syscall, consumed; NULL if entry did not fill it (the
 * syscall was in flight at attach), or when its entry copies are not
 * attached (no_entry): its pointer arguments are then read at exit. */
static __always_inline struct hr_stash *hr_stash_take(struct hr_em *em, __u32 nr)
{
	struct hr_stash *st;

	if (no_entry[nr])
		return 0;
	st = hr_stash_of(em->task->pid, false);
	hr_step(em->cpu, HR_STEP_STASH);
	if (st && st->nr == nr) {
		st->nr = 0;
		return st;
	}
	em->cpu->stats.toctou_fallbacks++;
	em->at_exit = 1;
	return 0;
}

/* Bit 7 of each byte of w that is '.' (the exact zero-byte test: no
 * carry crosses a byte). */
static __always_inline __u64 hr_dots(__u64 w)
{
	const __u64 low7 = 0x7f7f7f7f7f7f7f7fULL;
	__u64 t = w ^ 0x2e2e2e2e2e2e2e2eULL;

	return ~(((t & low7) + low7) | t | low7);
}

#define HR_STASH_WORDS 16	/* a path this many words long goes by plain loads and stores */

/* Whether word i of a path of len bytes, and the word before it (its dots in
 * *prev), hold two dots in a row; what lies past the path is not looked at. */
static __always_inline __u64 hr_dotdot_word(__u64 w, __u64 len, int i, __u64 *prev)
{
	__u64 m, pairs;

	if (len - i * 8 < 8)
		w &= (1ULL << ((len - i * 8) * 8)) - 1;
	m = hr_dots(w);
	pairs = (m & (m >> 8)) | ((*prev >> 56) & m & 0x80);
	*prev = m;
	return pairs;
}

/* Whether a path of len bytes at p may hold ".." (the kernel filter's
 * traversal test), read in place: true when unsure (longer than
 * HR_STASH_WORDS words). */
static __always_inline bool hr_path_dotdot(const __u8 *p, __u64 len)
{
	__u64 prev = 0, pairs = 0;

	if (len > HR_STASH_WORDS * 8)
		return true;
#pragma unroll
	for (int i = 0; i < HR_STASH_WORDS; i++) {
		if (i * 8 >= len)
			break;
		pairs |= hr_dotdot_word(((const __u64 *)p)[i], len, i, &prev);
	}
	return pairs != 0;
}

/* The test on an entry copy; true when unsure (no copy, or a long one). */
static __always_inline bool hr_stash_dotdot(struct hr_stash *st)
{
	return st->path_long || hr_path_dotdot(st->path, st->path_len);
}

/* The entry copy of a path into the record: up to HR_STASH_WORDS words with
 * plain loads and stores (a helper call costs more than the copy here), the
 * rest by one probe read (from lp, the long stash, if the path is there).
 * Bytes past the path land where the next field goes, inside the record's
 * room. On the way, whether it may hold ".." (the kernel filter's traversal
 * test): two dots in a row, also across words. */
static __always_inline void hr_put_stashed_path(struct hr_em *em, struct hr_stash *st,
						struct hr_stash_long *lp)
{
	__u8 *slot = hr_var_begin(em);
	__u64 len = st->path_len, w, prev = 0, pairs = 0;

	if (!slot)
		return;
	hr_clamp(len, HR_PATH_MAX - 1);
	if (lp) {
		bpf_probe_read_kernel(slot + 2, len, lp->path);
		pairs = 1;
	} else if (len > HR_STASH_WORDS * 8) {
		hr_clamp(len, HR_STASH_SHORT - 1);
		bpf_probe_read_kernel(slot + 2, len, st->path);
		pairs = 1;
	} else {
#pragma unroll
		for (int i = 0; i < HR_STASH_WORDS; i++) {
			if (i * 8 >= len)
				break;
			w = ((__u64 *)st->path)[i];
			((__u64 *)(slot + 2))[i] = w;
			pairs |= hr_dotdot_word(w, len, i, &prev);
		}
	}
	em->cpu->raw_dotdot = pairs != 0;
	hr_var_end(em, slot, len);
}

/*
 * Path parameter uptr: its entry copy, else read now. With `resolved` (a
 * constant: the event has the kernel's path of its new fd, so the kernel
 * filter has clauses for it, kfilter.rs), a path read now (no entry copy:
 * `entry_copies: false`, or the call was in flight at attach) gets the ".."
 * test on what was read, which is what the rules see too: left unknown, the
 * traversal clause kept every open. A read that faults leaves it unknown.
 * Elsewhere the loop is not built (after each of mount's paths it took the
 * program past the verifier's limit).
 */
static __always_inline void hr_put_path_stashed(struct hr_em *em, struct hr_stash *st, __u64 uptr,
						const bool resolved)
{
	struct hr_stash_long *lp = 0;
	__u8 *slot;

	if (st && st->path_len != HR_STASH_UNSET && st->path_long)
		lp = bpf_task_storage_get(&stash_long, bpf_get_current_task_btf(), 0, 0);
	if (st && st->path_len != HR_STASH_UNSET && (!st->path_long || lp)) {
		hr_put_stashed_path(em, st, lp);
		return;
	}
	em->at_exit = 1;
	slot = hr_put_path(em, uptr);
	if (slot && resolved)
		em->cpu->raw_dotdot = hr_path_dotdot(slot + 2, *(__u16 *)slot);
}

static __always_inline void hr_put_sockaddr_stashed(struct hr_em *em, struct hr_stash *st,
						    __u64 uptr, __u64 len)
{
	if (!st || !st->extra_len)
		em->at_exit = 1, hr_put_sockaddr(em, uptr, len);
	else
		hr_put_kernel(em, st->extra, st->extra_len, HR_STASH_EXTRA);
}

/* A plain argument as it was at entry, or as the registers say now. */
static __always_inline __u64 hr_stash_arg(struct hr_em *em, struct hr_stash *st, int i, __u64 now)
{
	/* Read now: else clang may merge both loads into one instruction on two
	 * pointer types, which the verifier refuses. */
	asm volatile("" : "+r"(now));
	if (!st)
		em->at_exit = 1;
	return st ? st->args[i] : now;
}

/* A u64 inside a struct read at entry (openat2's open_how), or read now. */
static __always_inline __u64 hr_stash_u64(struct hr_em *em, struct hr_stash *st, __u32 off, __u64 uptr)
{
	__u64 v = 0;

	if (st && off + 8 <= st->extra_len && off + 8 <= HR_STASH_EXTRA)
		bpf_probe_read_kernel(&v, sizeof(v), st->extra + off);
	else
		em->at_exit = 1, v = hr_user_u64(uptr);
	return v;
}

/*
 * An open's verdict before any variable field is written: true if the kernel
 * filter keeps it back whatever its path fields hold, which the walk would
 * otherwise find only after the entry copy went into the record. Its clauses
 * without a path (the flags, written already, and ".." in the entry copy,
 * read in place) do not hold, and the file's directory is one no filter path
 * can match below. False also when unsure: the open then goes the usual way.
 */
static __always_inline bool hr_kf_open_clear(struct hr_em *em, __u32 nr, struct hr_stash *st)
{
	struct hr_cpu *c = em->cpu;

	if (!dircache || !kf_enabled || em->ret < 0 || !st)
		return false;
	c->raw_dotdot = hr_stash_dotdot(st);
	if (!hr_kf_unused(em, nr, 0, 0))
		return false;
	if (!hr_fd_dir_clear(em, em->ret))
		return false;
	c->stats.dir_clear++;
	hr_step(c, HR_STEP_WALK);
	return true;
}

#endif
