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
static __always_inline struct pt_regs *hr_task_regs(struct hr_em *em)
{
	__u64 stack, off;

	if (!hr_has_cast())
		return (struct pt_regs *)bpf_task_pt_regs(em->task);
	stack = (__u64)em->task->stack;
	off = hr_regs_off;
	if (!off) {
		hr_regs_seen = (__u64)bpf_task_pt_regs(em->task);
		hr_regs_off = *(volatile __u64 *)&hr_regs_seen - stack;
		/* Read back, not reused: the difference of a number and the
		 * stack pointer stays a pointer to some verifiers (6.18's). */
		off = *(volatile __u64 *)&hr_regs_off;
	}
	return bpf_core_cast((void *)(stack + off), struct pt_regs);
}

/*
 * The current task and its thread id (0 if the process filter says no, or
 * the sensor is stopping).
 * One helper call serves the filter, the header and, later, the saved
 * registers: each helper call costs ~20 ns here. (The tracepoint record
 * carries the tid too, but programs may not read its common fields.)
 */
static __always_inline __u32 hr_tid(struct task_struct **task)
{
	struct task_struct *t = bpf_get_current_task_btf();

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
static __always_inline bool hr_dropped_early(struct hr_cpu *c, __u32 type, __s64 ret)
{
	if (!hr_kf_early(type, ret))
		return false;
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
				       __u8 *ev, __s64 ret, __u32 off)
{
	em->cpu = c;
	em->task = task;
	em->ev = ev;
	em->regs = 0;
	em->ret = ret;
	em->off = off;
	em->at_exit = 0;
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
		prio = priority[type & (HR_NR_SLOTS - 1)];
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

	if (!tid || hr_compat_syscall(task, type) || !(c = hr_cpu_get()) || hr_dropped_early(c, type, ret))
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
	hr_em_init(em, c, task, ev, ret, size);
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

static __always_inline int hr_submit_fixed(struct hr_em *em)
{
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

	if (!tid || hr_compat_syscall(task, type) || !(c = hr_cpu_get()) || hr_dropped_early(c, type, ret))
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
	hr_em_init(em, c, task, ev, ret, fixed_end);
	c->raw_dotdot = 1; /* unknown until an entry copy says */
	hr_step(c, HR_STEP_BEGIN);
	return 0;
}

static __always_inline int hr_submit(struct hr_em *em)
{
	struct hr_cpu *c = em->cpu;
	__u64 len = em->off;
	void *ring;

	hr_clamp(len, HR_EVENT_MAX);
	((struct hr_hdr *)em->ev)->len = len;
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

static __always_inline void hr_put_path(struct hr_em *em, __u64 uptr)
{
	__u8 *slot = hr_var_begin(em);
	long n;

	if (!slot)
		return;
	n = uptr ? hr_str_len(bpf_probe_read_user_str(slot + 2, HR_PATH_MAX, (void *)uptr)) : 0;
	if (n < 0) {
		em->cpu->stats.read_faults++;
		n = 0;
	}
	hr_var_end(em, slot, n); /* without the NUL */
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

#define HR_AF_UNIX 1
#define HR_AF_INET 2
#define HR_AF_INET6 10
#define HR_EINPROGRESS 115

/*
 * An address the kernel holds for the socket behind fd, written as a struct
 * sockaddr: the peer (connect, accept) or, with `local`, the socket's own
 * (bind, and the port connect picked). Only when `ok` (the call succeeded or
 * is in progress); a racing thread may change the caller's buffer, not this.
 */
static __always_inline void hr_put_sockaddr_of(struct hr_em *em, __s64 fd, bool ok, bool local)
{
	__u8 *slot = hr_var_begin(em);
	__u64 f, sock, sk;
	__u16 family;
	__u32 n = 0;

	if (!slot)
		return;
	if (!ok)
		goto out;
	f = hr_fd_file(em, fd);
	sock = f ? (__u64)hr_kread(f, struct file, private_data) : 0;
	sk = sock ? (__u64)hr_kread(sock, struct socket, sk) : 0;
	if (!sk)
		goto out;
	family = hr_kread(sk, struct sock, __sk_common.skc_family);
	__builtin_memset(slot + 2, 0, 28);
	*(__u16 *)(slot + 2) = family;
	if (family == HR_AF_INET || family == HR_AF_INET6) {
		/* skc_num (local port) is in host order, skc_dport in network order. */
		*(__u16 *)(slot + 4) = local ? bpf_htons(hr_kread(sk, struct sock, __sk_common.skc_num))
					     : hr_kread(sk, struct sock, __sk_common.skc_dport);
		if (family == HR_AF_INET) {
			*(__u32 *)(slot + 6) = local ? hr_kread(sk, struct sock, __sk_common.skc_rcv_saddr)
						     : hr_kread(sk, struct sock, __sk_common.skc_daddr);
			n = 16;
		} else {
			struct sock *s = (struct sock *)sk;

			if (local)
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_rcv_saddr);
			else
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_daddr);
			n = 28;
		}
	} else if (family == HR_AF_UNIX) {
		__u64 peer = local ? sk : (__u64)hr_kread(sk, struct unix_sock, peer);
		__u64 addr = peer ? (__u64)hr_kread(peer, struct unix_sock, addr) : 0;
		__u64 len = addr ? hr_kread(addr, struct unix_address, len) : 0;

		/* An unbound socket has no name: the family alone says unix. */
		hr_clamp(len, HR_SOCKADDR_MAX);
		if (len)
			bpf_probe_read_kernel(slot + 2, len, &((struct unix_address *)addr)->name);
		n = len ? len : 2;
	}
out:
	hr_var_end(em, slot, n);
}

/* What a connect really connected to. */
static __always_inline void hr_put_sockpeer(struct hr_em *em, __u64 fd)
{
	hr_put_sockaddr_of(em, fd, em->ret == 0 || em->ret == -HR_EINPROGRESS, 0);
}

/* The three execve fields only make sense once the new image runs (ret == 0). */
static __always_inline void hr_put_exe(struct hr_em *em)
{
	hr_put_dpath(em, em->ret == 0 ? HR_WALK_EXE : HR_WALK_NONE, 0);
}

static __always_inline void hr_put_cwd(struct hr_em *em)
{
	hr_put_dpath(em, em->ret == 0 ? HR_WALK_CWD : HR_WALK_NONE, 0);
}

static __always_inline void hr_put_args(struct hr_em *em)
{
	struct task_struct *t = em->task;
	__u64 start = t->mm->arg_start;
	__u64 end = t->mm->arg_end;

	hr_put_user(em, start, em->ret == 0 && end > start ? end - start : 0, HR_SNAP_MAX);
}

/* ---- TOCTOU: pointer arguments copied at entry, merged at exit ---- */

static __always_inline struct hr_stash *hr_stash_begin(__u32 nr)
{
	struct hr_stash *st;
	struct task_struct *task;
	struct hr_cpu *c;

	if (!hr_tid(&task))
		return 0;
	if (step_clock && (c = hr_cpu_get()))
		hr_step_start(c, nr);
	st = bpf_task_storage_get(&stash, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
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

/* A path shorter than this is copied to the stack first: hardened usercopy
 * checks a copy's destination, and a slab object (the stash) costs it a slab
 * lookup. The task's stack costs a bounds compare (6.1, 6.12); 6.13+ runs a
 * tracepoint program with a big frame on a per-CPU stack, which skips the
 * slab part only (~20 ns of a ~200 ns copy here). */
#define HR_STASH_QUICK 48

static __always_inline void hr_stash_path(struct hr_stash *st, const void *uptr)
{
	__u64 quick[HR_STASH_QUICK / 8] = {};
	long n = bpf_probe_read_user_str(quick, sizeof(quick), uptr);
	struct hr_stash_long *lp;

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

static __always_inline void hr_stash_extra(struct hr_stash *st, const void *uptr, __u64 len)
{
	if (len > HR_STASH_EXTRA)
		len = HR_STASH_EXTRA;
	if (uptr && len && !bpf_probe_read_user(st->extra, len, uptr))
		st->extra_len = len;
	hr_stash_done();
}

/* Whether the pending entry copy belongs to syscall nr (not consumed). */
static __always_inline bool hr_stash_is(__u32 nr)
{
	struct hr_stash *st = bpf_task_storage_get(&stash, bpf_get_current_task_btf(), 0, 0);

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
	st = bpf_task_storage_get(&stash, em->task, 0, 0);
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

/* The entry copy of a path into the record: up to HR_STASH_WORDS words with
 * plain loads and stores (a helper call costs more than the copy here), the
 * rest by one probe read (from lp, the long stash, if the path is there).
 * Bytes past the path land where the next field goes, inside the record's
 * room. On the way, whether it may hold ".." (the kernel filter's traversal
 * test): two dots in a row, also across words. */
#define HR_STASH_WORDS 16

static __always_inline void hr_put_stashed_path(struct hr_em *em, struct hr_stash *st,
						struct hr_stash_long *lp)
{
	__u8 *slot = hr_var_begin(em);
	__u64 len = st->path_len, w, m, prev = 0, pairs = 0;

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
			if (len - i * 8 < 8) /* what lies past the path is not looked at */
				w &= (1ULL << ((len - i * 8) * 8)) - 1;
			m = hr_dots(w);
			pairs |= (m & (m >> 8)) | ((prev >> 56) & m & 0x80);
			prev = m;
		}
	}
	em->cpu->raw_dotdot = pairs != 0;
	hr_var_end(em, slot, len);
}

static __always_inline void hr_put_path_stashed(struct hr_em *em, struct hr_stash *st, __u64 uptr)
{
	struct hr_stash_long *lp = 0;

	if (st && st->path_len != HR_STASH_UNSET && st->path_long)
		lp = bpf_task_storage_get(&stash_long, em->task, 0, 0);
	if (!st || st->path_len == HR_STASH_UNSET || (st->path_long && !lp))
		em->at_exit = 1, hr_put_path(em, uptr);
	else
		hr_put_stashed_path(em, st, lp);
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

#endif
