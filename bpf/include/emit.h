/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Event emitters used by the generated handlers (capture.gen.c).
 * Expects the maps cpu_state, rings and stash and the config in capture.bpf.c.
 *
 * Per-CPU rings (arings): every event is written in place with plain stores
 * and published by moving head; no helper call, no lock, no copy.
 * Shared rings (BPF ringbufs, --cpus-per-buffer > 1): a fixed-size event is
 * written in place (reserve/submit); a variable-size one is built in this
 * CPU's scratch (cpu_state.ev) and copied out with one bpf_ringbuf_output().
 * Its parts: emit_path.h (paths from the dentry tree), emit_sock.h (socket
 * addresses from the kernel), emit_stash.h (the entry copies, TOCTOU).
 */
#ifndef HARRIER_EMIT_H
#define HARRIER_EMIT_H

#include "percpu.h"
#include "dpath.h"

/* Classic syscall tracepoint records: 8 bytes of common fields (not readable
 * by BPF), then the syscall's fields. */
struct hr_exit_ctx {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

struct hr_enter_ctx {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

/* What a handler is building. Lives on the stack, fully inlined. */
struct hr_em {
	struct hr_cpu *cpu;
	struct task_struct *task;	/* current */
	__u8 *ev;		/* the event: ring memory, or scratch (shared, variable) */
	struct hr_aring *ring;	/* per-CPU ring, published at submit */
	__u64 head;		/* where this event starts in it */
	struct pt_regs *regs;
	__s64 ret;
	__u32 off;		/* bytes written so far */
	__u32 at_exit;		/* a pointer argument was read at exit: HR_ARGS_AT_EXIT */
	__u32 type;		/* the header's type (a constant in each handler) */
	__u32 kf_unused;	/* the kernel filter's answer is known: keep it back (kfdirs.h) */
	__s64 sock_fd;		/* hr_sock_of's last fd (-1: none): a connect's fields share it */
	__u64 sock_file, sock;
};

/* Arguments at exit come from the saved user registers: they are what the
 * caller passed (the kernel does not write them back). */
#define HR_ARG(em, reg) ((__u64)(em)->regs->reg)
#define HR_LEN_ALL (~0ULL)
#define HR_TS_COMPAT 0x0002	/* arch/x86/include/asm/thread_info.h */

/* Where a task's saved registers lie past its stack page (x86's
 * task_pt_regs: the stack's top, less FRED's padding, less the struct): one
 * value per kernel build, learnt from the first call of the helper. The
 * helper's answer goes through hr_regs_seen to become a number: the verifier
 * keeps a pointer a pointer in registers, and 6.12's refuses arithmetic on it. */
__u64 hr_regs_off = 0;
__u64 hr_regs_seen = 0;

/* The caller's saved registers. With plain loads (bpf_rdonly_cast, 6.2+)
 * the address is the stack page plus hr_regs_off: no helper call (~20 ns)
 * but on the first event. */
static __always_inline struct pt_regs *hr_regs_of(struct task_struct *t)
{
	__u64 stack, off;

	if (!hr_has_cast())
		return (struct pt_regs *)bpf_task_pt_regs(t);
	stack = (__u64)t->stack;
	off = hr_regs_off;
	if (!off) {
		hr_regs_seen = (__u64)bpf_task_pt_regs(bpf_get_current_task_btf());
		hr_regs_off = *(volatile __u64 *)&hr_regs_seen - stack;
		/* Read back, not reused: the difference of a number and the
		 * stack pointer stays a pointer to some verifiers (6.18's). */
		off = *(volatile __u64 *)&hr_regs_off;
	}
	return bpf_core_cast((void *)(stack + off), struct pt_regs);
}

static __always_inline struct pt_regs *hr_task_regs(struct hr_em *em)
{
	return hr_regs_of(em->task);
}

#include "current.h"

/*
 * The current task and its thread id (0 if the process filter says no, or
 * the sensor is stopping).
 * One read of current serves the filter, the header and, later, the saved
 * registers. (The tracepoint record carries the tid too, but programs may
 * not read its common fields.)
 */
static __always_inline __u32 hr_tid(struct task_struct **task)
{
	struct task_struct *t = hr_current();

	*task = t;
	if (hr_off || (filter_tgid && t->tgid != filter_tgid))
		return 0;
	return t->pid;
}

/* A 32-bit compat syscall has other numbers: the per-syscall tracepoints
 * ignore them, and the dispatcher's handlers do too, here. Life-cycle events
 * of compat tasks are kept. */
static __always_inline bool hr_compat_syscall(struct task_struct *t, __u32 type)
{
	return type < HR_META_FORK && (t->thread_info.status & HR_TS_COMPAT);
}

static __always_inline struct hr_cpu *hr_cpu_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_state, &zero);
}

/* The event's time, read once it is known to be kept (a clock read is ~50 ns
 * here, and most opens are discarded); a guarded event has it already, the
 * one its guard program saw. Within a CPU's ring the order stays the
 * times' order: programs do not nest on a CPU (trace_call_bpf). */
static __always_inline __u64 hr_stamp(__u8 *ev)
{
	struct hr_hdr *h = (struct hr_hdr *)ev;

	if (!h->ts)
		h->ts = bpf_ktime_get_ns();
	return h->ts;
}

#include "kfilter.h"

/* An event the kernel filter drops before it is written: counted as
 * produced and filtered, nothing else done. */
static __always_inline bool hr_dropped_early(struct hr_cpu *c, struct task_struct *t, __u32 type, __s64 ret)
{
	if (!hr_kf_early(t, type, ret))
		return false;
	hr_untold_kept_back(t, type, ret);
	c->stats.events++;
	c->stats.filtered++;
	return true;
}

static __always_inline void hr_header(__u8 *ev, __u32 tid, __u32 type, __s64 ret, __u32 len)
{
	struct hr_hdr *h = (struct hr_hdr *)ev;

	h->ts = 0; /* hr_stamp: an event the kernel filter discards reads no clock */
	h->tid = tid;
	h->type = type;
	h->len = len;
	*(__s64 *)(ev + sizeof(*h)) = ret;
}

static __always_inline void hr_em_init(struct hr_em *em, struct hr_cpu *c, struct task_struct *task,
				       __u8 *ev, __u32 type, __s64 ret, __u32 off)
{
	em->type = type;
	em->cpu = c;
	em->task = task;
	em->ev = ev;
	em->regs = 0;
	em->ret = ret;
	em->off = off;
	em->at_exit = 0;
	em->kf_unused = 0;
	em->sock_fd = -1;
}

/* Room for `need` bytes in this CPU's array ring, or NULL (counted as a
 * drop). An event of an ordinary type must leave the reserve free too, one
 * of a severe rule's the reserve's last part (capture.bpf.c). */
static __always_inline __u8 *hr_aring_claim(struct hr_em *em, struct hr_cpu *c, __u32 type, __u64 need)
{
	__u64 miss[HR_DROP_MAX] = {}, extra = 0;
	__u8 prio;
	__u8 *ev;

	if (aring_reserve && type < HR_NR_SLOTS) {
		/* The mask stays in the code (clang drops it after the compare):
		 * 6.1's verifier loses the compare's bound when type is spilled. */
		__u32 i = type;

		barrier_var(i);
		prio = priority[i & (HR_NR_SLOTS - 1)];
		extra = prio == HR_PRIO_EXEC ? 0 : prio ? aring_exec_reserve : aring_reserve;
	}
	ev = hr_aring_reserve(&arings, c->ring, aring_mask, aring_last, need + extra, miss, &em->ring, &em->head);
	if (!ev) {
		if (miss[HR_DROP_NO_RING])
			c->stats.drops[HR_DROP_NO_RING]++;
		else
			c->stats.drops[extra ? HR_DROP_SHED : HR_DROP_RING_FULL]++;
	}
	return ev;
}

static __always_inline void hr_aring_publish(struct hr_em *em, __u64 len)
{
	hr_aring_commit(em->ring, em->head, len);
}

/* Non-zero: return. Fixed-size events are always written in place. */
static __always_inline int hr_begin_fixed(struct hr_em *em, __u32 type, __s64 ret, const __u32 size)
{
	struct task_struct *task;
	__u32 tid = hr_tid(&task);
	struct hr_cpu *c;
	void *ring;
	__u8 *ev;

	if (!tid || entry_copies_only || hr_compat_syscall(task, type) || !(c = hr_cpu_get()) ||
	    hr_dropped_early(c, task, type, ret))
		return 1;
	hr_step_start(c, type);
	c->stats.events++;
	if (shared_rings) {
		/* Defined on every path: clang may keep them in registers either way. */
		em->ring = 0;
		em->head = 0;
		ring = bpf_map_lookup_elem(&rings, &c->ring);
		if (!ring) {
			c->stats.drops[HR_DROP_NO_RING]++;
			return 1;
		}
		ev = bpf_ringbuf_reserve(ring, size, 0);
		if (!ev) {
			c->stats.drops[HR_DROP_RING_FULL]++;
			return 1;
		}
	} else if (!(ev = hr_aring_claim(em, c, type, size))) {
		return 1;
	}
	hr_header(ev, tid, type, ret, size);
	hr_em_init(em, c, task, ev, type, ret, size);
	hr_step(c, HR_STEP_BEGIN);
	return 0;
}

/* The header's type says whether arguments were read at exit (set last:
 * whether they were is known only once every field is written). */
static __always_inline void hr_mark_at_exit(struct hr_em *em)
{
	if (em->at_exit)
		((struct hr_hdr *)em->ev)->type |= HR_ARGS_AT_EXIT;
}

/* nr: the event's type as a constant (em->type is reloaded after every
 * helper call), so that untold.h's code folds away in the handlers of the
 * syscalls that neither return nor close fds, and the verifier never walks it. */
static __always_inline int hr_submit_fixed(struct hr_em *em, const __u32 nr)
{
	hr_untold_sent(em->task, nr, em->ret);
	hr_stamp(em->ev);
	hr_mark_at_exit(em);
	if (shared_rings)
		bpf_ringbuf_submit(em->ev, BPF_RB_NO_WAKEUP);
	else
		hr_aring_publish(em, em->off);
	hr_step_end(em->cpu, HR_STEP_SUBMIT);
	return 0;
}

/* Variable-size events: in place in a per-CPU ring (which must have room
 * for the largest event), else in per-CPU scratch, copied out at submit. */
static __always_inline int hr_begin(struct hr_em *em, __u32 type, __s64 ret, __u32 fixed_end)
{
	struct task_struct *task;
	__u32 tid = hr_tid(&task);
	struct hr_cpu *c;
	__u8 *ev;

	if (!tid || entry_copies_only || hr_compat_syscall(task, type) || !(c = hr_cpu_get()) ||
	    hr_dropped_early(c, task, type, ret))
		return 1;
	hr_step_start(c, type);
	if (shared_rings) {
		em->ring = 0;
		em->head = 0;
		ev = c->ev;
	} else if (!(ev = hr_aring_claim(em, c, type, HR_SCRATCH))) {
		c->stats.events++;
		return 1;
	}
	hr_header(ev, tid, type, ret, 0);
	hr_em_init(em, c, task, ev, type, ret, fixed_end);
	c->raw_dotdot = 1; /* unknown until an entry copy says */
	hr_step(c, HR_STEP_BEGIN);
	return 0;
}

static __always_inline int hr_submit(struct hr_em *em, const __u32 nr)
{
	struct hr_cpu *c = em->cpu;
	__u64 len = em->off;
	void *ring;

	hr_clamp(len, HR_EVENT_MAX);
	((struct hr_hdr *)em->ev)->len = len;
	hr_untold_sent(em->task, nr, em->ret);
	hr_stamp(em->ev);
	hr_mark_at_exit(em);
	c->stats.events++;
	if (!shared_rings) {
		hr_aring_publish(em, len);
		hr_step_end(c, HR_STEP_SUBMIT);
		return 0;
	}
	ring = bpf_map_lookup_elem(&rings, &c->ring);
	if (!ring) {
		c->stats.drops[HR_DROP_NO_RING]++;
		return 0;
	}
	if (bpf_ringbuf_output(ring, c->ev, len, BPF_RB_NO_WAKEUP))
		c->stats.drops[HR_DROP_RING_FULL]++;
	return 0;
}

static __always_inline void hr_put_u32(struct hr_em *em, __u32 off, __u32 v)
{
	*(__u32 *)(em->ev + off) = v;
}

static __always_inline void hr_put_u64(struct hr_em *em, __u32 off, __u64 v)
{
	*(__u64 *)(em->ev + off) = v;
}

static __always_inline __u32 hr_tgid(struct hr_em *em)
{
	return em->task->tgid;
}

static __always_inline __u64 hr_ret_len(struct hr_em *em)
{
	return em->ret > 0 ? em->ret : 0;
}

static __always_inline __u32 hr_user_u32(__u64 uptr)
{
	__u32 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)uptr);
	return v;
}

static __always_inline __u64 hr_user_u64(__u64 uptr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)uptr);
	return v;
}

static __always_inline __u64 hr_user_int(__u64 uptr)
{
	__s32 v = 0;

	if (uptr)
		bpf_probe_read_user(&v, sizeof(v), (void *)uptr);
	return v > 0 ? v : 0;
}

/*
 * Variable fields: u16 length, then the bytes. A field that would start past
 * HR_VAR_LIMIT is left out (the event just ends); the decoder treats missing
 * trailing fields as absent, and the truncated counter says it happened.
 */
static __always_inline __u8 *hr_var_begin(struct hr_em *em)
{
	__u64 o = em->off;

	if (o > HR_VAR_LIMIT) {
		em->cpu->stats.truncated++;
		return 0;
	}
	hr_clamp(o, HR_VAR_LIMIT);
	return em->ev + o;
}

static __always_inline void hr_var_end(struct hr_em *em, __u8 *slot, __u32 n)
{
	if (n > HR_SNAP_MAX)
		n = HR_SNAP_MAX;
	*(__u16 *)slot = n;
	em->off += 2 + n;
}

/* A parameter nobody asked for: absent on the wire (HR_VAR_ABSENT, no bytes). */
static __always_inline void hr_put_absent(struct hr_em *em)
{
	__u8 *slot = hr_var_begin(em);

	if (!slot)
		return;
	*(__u16 *)slot = HR_VAR_ABSENT;
	em->off += 2;
}

/* Whether parameter i of syscall nr is collected (skip_params,
 * skip_params_ok: constants the verifier folds). */
static __always_inline bool hr_collect(struct hr_em *em, __u32 nr, __u32 i)
{
	if (skip_params[nr] & (1u << i))
		return false;
	return !((skip_params_ok[nr] & (1u << i)) && em->ret >= 0);
}

/* len bytes (at most max) of user memory as a variable field. */
static __always_inline void hr_put_user(struct hr_em *em, __u64 uptr, __u64 len, const __u64 max)
{
	__u8 *slot = hr_var_begin(em);

	if (!slot)
		return;
	if (!uptr)
		len = 0;
	if (len > max)
		len = max;
	if (len && bpf_probe_read_user(slot + 2, len, (void *)uptr)) {
		em->cpu->stats.read_faults++;
		len = 0;
	}
	hr_var_end(em, slot, len);
}

/* len bytes (at most max) of kernel memory, e.g. an entry copy. */
static __always_inline void hr_put_kernel(struct hr_em *em, const void *src, __u64 len, const __u64 max)
{
	__u8 *slot = hr_var_begin(em);

	if (!slot)
		return;
	if (len > max)
		len = max;
	bpf_probe_read_kernel(slot + 2, len, src);
	hr_var_end(em, slot, len);
}

/* String length (without the NUL) from bpf_probe_read_*_str's return value,
 * or -1 on a fault. Older kernels (6.1 among them) return 0 for an empty
 * string, the NUL copied but not counted; newer ones (6.18) return 1. */
static __always_inline long hr_str_len(long n)
{
	if (n < 0)
		return -1;
	return n > 0 ? n - 1 : 0;
}

/* A path read now into the record: the slot written (its u16 length, then
 * the bytes), or NULL if it could not be read (written empty). */
static __always_inline __u8 *hr_put_path(struct hr_em *em, __u64 uptr)
{
	__u8 *slot = hr_var_begin(em);
	long n;

	if (!slot)
		return 0;
	n = uptr ? hr_str_len(bpf_probe_read_user_str(slot + 2, HR_PATH_MAX, (void *)uptr)) : 0;
	if (n < 0) {
		em->cpu->stats.read_faults++;
		hr_var_end(em, slot, 0);
		return 0;
	}
	hr_var_end(em, slot, n); /* without the NUL */
	return slot;
}

static __always_inline void hr_put_buf(struct hr_em *em, __u64 uptr, __u64 len)
{
	hr_put_user(em, uptr, len < snaplen ? len : snaplen, HR_SNAP_MAX);
}

static __always_inline void hr_put_sockaddr(struct hr_em *em, __u64 uptr, __u64 len)
{
	hr_put_user(em, uptr, len, HR_SOCKADDR_MAX);
}

/* Gathers up to min(limit, snaplen) bytes from an iovec array. */
static __always_inline void hr_put_iov(struct hr_em *em, __u64 uiov, __u64 cnt, __u64 limit)
{
	__u8 *slot = hr_var_begin(em);
	__u32 total = 0;
	__u64 want;

	if (!slot)
		return;
	want = limit < snaplen ? limit : snaplen;
	for (int i = 0; i < HR_IOV_MAX; i++) {
		struct iovec iov;
		__u64 n;

		if (i >= cnt || total >= want || total >= HR_SNAP_MAX)
			break;
		if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(uiov + i * sizeof(iov)))) {
			em->cpu->stats.read_faults++;
			break;
		}
		n = iov.iov_len;
		if (n > want - total)
			n = want - total;
		if (n > HR_SNAP_MAX)
			n = HR_SNAP_MAX;
		if (n && bpf_probe_read_user(slot + 2 + total, n, iov.iov_base)) {
			em->cpu->stats.read_faults++;
			break;
		}
		total += n;
	}
	hr_var_end(em, slot, total);
}

static __always_inline int hr_user_msghdr(__u64 umsg, struct user_msghdr *m)
{
	if (umsg && !bpf_probe_read_user(m, sizeof(*m), (void *)umsg))
		return 0;
	__builtin_memset(m, 0, sizeof(*m));
	return -1;
}

/* `failed`: the kernel fills this address and the call failed, so leave it out. */
static __always_inline void hr_put_msgaddr(struct hr_em *em, __u64 umsg, bool failed)
{
	struct user_msghdr m;

	hr_user_msghdr(umsg, &m);
	hr_put_sockaddr(em, (__u64)m.msg_name, failed ? 0 : m.msg_namelen);
}

static __always_inline void hr_put_msgdata(struct hr_em *em, __u64 umsg, __u64 limit)
{
	struct user_msghdr m;

	hr_user_msghdr(umsg, &m);
	hr_put_iov(em, (__u64)m.msg_iov, m.msg_iovlen, limit);
}

/* Where hr_put_argv's loop is: the field, the user array, bytes so far. */
struct hr_argv_at {
	__u8 *slot;
	__u64 uargv;
	__u64 total;
};

/* One entry of the array; 1 ends the loop. A bpf_loop callback: the verifier
 * checks it once, where an inlined loop of HR_ARGV_MAX entries was checked
 * entry by entry (much of execve's load time). */
static long hr_argv_cb(__u32 i, void *ctx)
{
	struct hr_argv_at *a = ctx;
	__u64 p = 0, room, at;
	long n;

	if (a->total >= HR_SNAP_MAX - 1)
		return 1;
	if (bpf_probe_read_user(&p, sizeof(p), (void *)(a->uargv + i * 8)) || !p)
		return 1;
	/* Opaque masks: clang would drop plain ones it can prove redundant,
	 * and the verifier needs both bounds. */
	room = HR_SNAP_MAX - 1 - a->total;
	at = a->total;
	asm volatile("%0 &= 4095" : "+r"(room));
	asm volatile("%0 &= 4095" : "+r"(at));
	n = hr_str_len(bpf_probe_read_user_str(a->slot + 2 + at, room, (void *)p));
	if (n < 0)
		return 1;
	a->total += n + 1; /* the NUL is always copied, counted or not */
	return 0;
}

/* A NULL-terminated string array, joined with NULs (like /proc/PID/cmdline). */
static __always_inline void hr_put_argv(struct hr_em *em, __u64 uargv)
{
	struct hr_argv_at a = { .slot = hr_var_begin(em), .uargv = uargv };

	if (!a.slot)
		return;
	if (uargv)
		bpf_loop(HR_ARGV_MAX, hr_argv_cb, &a, 0);
	hr_var_end(em, a.slot, a.total);
}

#include "emit_path.h"

/* The three execve fields only make sense once the new image runs (ret == 0). */
static __always_inline void hr_put_exe(struct hr_em *em)
{
	hr_put_dpath(em, em->ret == 0 ? HR_WALK_EXE : HR_WALK_NONE, 0, false);
}

static __always_inline void hr_put_cwd(struct hr_em *em)
{
	hr_put_dpath(em, em->ret == 0 ? HR_WALK_CWD : HR_WALK_NONE, 0, false);
}

static __always_inline void hr_put_args(struct hr_em *em)
{
	struct task_struct *t = em->task;
	__u64 start = t->mm->arg_start;
	__u64 end = t->mm->arg_end;

	hr_put_user(em, start, em->ret == 0 && end > start ? end - start : 0, HR_SNAP_MAX);
}

#include "emit_sock.h"
#include "emit_stash.h"

#endif
