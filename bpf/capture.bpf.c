// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Harrier's exit-only syscall sensor.
 *
 * Two ways to reach the exit handlers (user space picks one, see attach.rs):
 * - per-syscall: each selected syscall gets its own syscalls:sys_exit_<name>
 *   tracepoint (hr_exit_<name>), so a syscall nobody selected runs no BPF;
 * - dispatcher: one tp_btf sys_exit program (hr_dispatch) runs on every
 *   syscall and tail-calls the selected syscall's handler (hr_tail_<name>)
 *   through exit_tails; cheaper per selected event, and one link to detach.
 * Typed syscalls have a generated handler body (capture.gen.c, from
 * schema/events.tbl); every other syscall shares the generic one.
 * open/openat/openat2/creat/connect/execve* also have an entry handler that
 * copies their pointer arguments, merged at exit (TOCTOU); it stays on its
 * per-syscall sys_enter tracepoint in both modes, as do exit/exit_group.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "harrier.h"
#include "percpu.h"
#include "dpath.h"
#include "tree/inval.h"
#include "tree/dircache.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load; constant for the verifier. */
const volatile __u32 filter_tgid = 0;	/* 0: every process */
const volatile __u32 snaplen = 80;	/* data bytes kept per buffer */
const volatile bool shared_rings = 0;	/* CPUs share BPF ringbufs, else per-CPU array rings */
const volatile __u64 aring_mask = 0;	/* per-CPU ring size - 1 */
const volatile __u64 aring_last = 0;	/* last offset a record may start at */

/* The last part of each per-CPU ring (aring_reserve bytes, 0: none) is kept
 * for priority events: the process life cycle and the syscalls user space
 * marks in `priority` (those its most severe rules read). A flood of
 * ordinary events then cannot crowd out the exec that follows it; the
 * ordinary events refused are counted as shed. The reserve's last part
 * (aring_exec_reserve bytes) is the life cycle's alone: a flood of a severe
 * rule's syscall (every open, when a Critical rule reads open_write) cannot
 * crowd out the exec either, and every later alert names its process from
 * that. `priority` may change while events flow (rules reloaded): user
 * space writes it through the mapping. */
const volatile __u64 aring_reserve = 0;
const volatile __u64 aring_exec_reserve = 0;
#define HR_PRIO_SEVERE 1	/* may use the reserve but its last part */
#define HR_PRIO_EXEC 2		/* the life cycle: the whole ring (execve, execveat) */
__u8 priority[HR_NR_SLOTS] = {};

/* Benchmarks (harrier run --entry-copies-only): the entry programs copy as
 * usual and every other program returns once it has the task, which any
 * real handler needs. What is left is the least a sensor with TOCTOU entry
 * copies can cost on this attach plan. */
const volatile bool entry_copies_only = 0;

/* Set by user space when it stops: every program returns at once from then
 * on, so the final figures are exact while the links are detached (one
 * grace period per tracepoint, seconds for a few dozen). */
volatile bool hr_off = 0;

/* What each typed event collects; by default all its table says. Per
 * syscall number: parameters left out (bit i: parameter i in wire order,
 * absent on the wire), parameters left out when the call succeeded, and
 * whether its entry copies are left unattached (pointer arguments are read
 * at exit instead). Constants: the verifier drops the code they rule out. */
const volatile __u32 skip_params[HR_NR_SLOTS] = {};
const volatile __u32 skip_params_ok[HR_NR_SLOTS] = {};
const volatile __u8 no_entry[HR_NR_SLOTS] = {};

/* The path cache (tree/dircache.h): on where the kernel has the hooks that
 * invalidate it (tree/inval.h), attached with it; names a walk takes before
 * it looks a directory up. */
const volatile bool dircache = 0;
const volatile __u32 dc_after = 2;

/* Per-CPU state: counters, which ring this CPU writes, event and path scratch. */
struct hr_cpu {
	struct hr_cpu_stats stats;
	__u32 ring;
	__u32 step_on;		/* steps.h: this handler's steps are timed */
	__u64 step_t;		/* steps.h: the last mark */
	__u32 raw_dotdot;	/* this event's path as passed may have "..": kfilter.h */
	__u32 cur_on;		/* current.h: this CPU reads current from its slot */
	__u64 cur_off;		/* current.h: this CPU's per-CPU offset, 0 until known */
	__u64 cur_seen;		/* current.h: a pointer, stored to be read back as a number */
	__u32 cur_checked;	/* current.h: this CPU's reads that agreed with the helper */
	__u32 pad;
	struct hr_dwalk walk;	/* dpath.h */
	__u8 ev[HR_SCRATCH];
	__u8 path[HR_PATHBUF];
	struct hr_dcval dc;	/* a path cache entry being stored */
	struct hr_kf_last kf_last;	/* emit_path.h: the last directory found clear */
};

HR_CPU_STATE_MAP(struct hr_cpu);

#include "steps.h"

/* Per-CPU rings (the default), entry i for CPU i; user space sizes it. A lock-
 * free single-producer ring costs ~50 ns less per event than a BPF ringbuf. */
HR_ARINGS_MAP;

/* Rings shared by a group of CPUs (--cpus-per-buffer > 1) need a multi-
 * producer ring: BPF ringbufs, which user space creates and sizes this for. */
struct ring_template {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct ring_template);
} rings SEC(".maps");

#define HR_STASH_UNSET 0xffff

/*
 * Pointer arguments copied at syscall entry, per thread. A thread holds a
 * slot of stash_slots (tid & HR_STASH_SLOTS - 1) from its first copy to its
 * exit: an inlined array lookup, where task storage costs a helper call and
 * two more lines to find the data (~30 ns of each copy and each exit here).
 * A thread whose slot another holds uses its task storage, `stash`. That is
 * small: each new thread's first copy allocates it, and the allocator
 * (bpf_mem_alloc) refills its per-CPU cache of a 4 KiB object every few
 * allocations by a self-IPI, a VM exit here (~3 us per new process, with the
 * path inline at 4 KiB). A path of HR_STASH_SHORT - 1 bytes or more is
 * copied again, whole, into the thread's stash_long.
 */
#define HR_STASH_SHORT 248
struct hr_stash {
	__u32 nr;
	__u16 path_len;
	__u16 extra_len;
	__u64 owner;		/* stash_slots: the thread holding the slot, 0: free */
	__u8 path_long;		/* the path is in stash_long */
	__u8 pad[7];
	__u64 args[6];
	char path[HR_STASH_SHORT];
	__u8 extra[HR_STASH_EXTRA];
};

_Static_assert(sizeof(struct hr_stash) == 448, "a stash slot is seven whole cache lines");

#define HR_STASH_SLOTS 4096	/* STASH_SLOTS in harrier-capture */
/* Slots in use (user space: a power of two, tests make it one). */
const volatile __u32 stash_mask = HR_STASH_SLOTS - 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_STASH_SLOTS);
	__type(key, __u32);
	__type(value, struct hr_stash);
} stash_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hr_stash);
} stash SEC(".maps");

struct hr_stash_long {
	char path[HR_PATH_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hr_stash_long);
} stash_long SEC(".maps");

/* Dispatcher mode: slot nr holds the handler of selected syscall nr. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, HR_NR_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} exit_tails SEC(".maps");

/* An empty slot makes bpf_tail_call return: the syscall is not selected. */
static __always_inline void hr_tail_to(void *ctx, __u32 nr)
{
	bpf_tail_call(ctx, &exit_tails, nr);
}

/* The guard's program (guard.h), one per program type: a tail call may only
 * go to a program of its caller's type and hook. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} guard_tails_tp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} guard_tails_btf SEC(".maps");

#include "emit.h"
#include "task.h"
#include "capture.gen.c"

/* Loaded only with enforcement (Config::guard). */
SEC("tracepoint")
int hr_guard_tp(void *ctx)
{
	return hr_guard_run();
}

SEC("tp_btf/sys_exit")
int BPF_PROG(hr_guard_btf, struct pt_regs *regs, long ret)
{
	return hr_guard_run();
}

/* The one program on every syscall exit in dispatcher mode: no helper call
 * before the tail call, so an unselected syscall costs a few loads. */
SEC("tp_btf/sys_exit")
int BPF_PROG(hr_dispatch, struct pt_regs *regs, long ret)
{
	hr_tail_to(ctx, (__u32)regs->orig_ax);
	return 0;
}

/* Every syscall without a typed event: number, return value, raw arguments. */
static __always_inline int hr_do_generic(struct pt_regs *regs, long nr, long ret, const bool tail)
{
	struct hr_em em;

	if (hr_begin_fixed(&em, nr, ret, 24 + 6 * 8))
		return 0;
	em.regs = tail ? regs : hr_task_regs(&em);
	hr_put_u64(&em, 24, HR_ARG(&em, di));
	hr_put_u64(&em, 32, HR_ARG(&em, si));
	hr_put_u64(&em, 40, HR_ARG(&em, dx));
	hr_put_u64(&em, 48, HR_ARG(&em, r10));
	hr_put_u64(&em, 56, HR_ARG(&em, r8));
	hr_put_u64(&em, 64, HR_ARG(&em, r9));
	if (hr_kf_drop(&em, nr, 0, 24 + 6 * 8))
		return hr_discard(&em, nr, true);
	return hr_submit_fixed(&em, nr);
}

SEC("tracepoint")
int hr_exit_generic(struct hr_exit_ctx *ctx)
{
	hr_do_generic(0, ctx->nr, ctx->ret, false);
	hr_guard_finish(ctx, &guard_tails_tp);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(hr_tail_generic, struct pt_regs *regs, long ret)
{
	hr_do_generic(regs, regs->orig_ax, ret, true);
	hr_guard_finish(ctx, &guard_tails_btf);
	return 0;
}

/* openat's handler on an fexit of its syscall function instead of its
 * tracepoint (Config::fexit_openat, for harrier-bench hook-costs): `regs` is
 * the caller's saved registers, as the dispatcher's. Loaded only when asked,
 * on kernels with BPF trampolines. */
SEC("fexit/__x64_sys_openat")
int BPF_PROG(hr_fexit_openat, struct pt_regs *regs, long ret)
{
	hr_do_openat(ctx, regs, 257, ret, true);
	hr_guard_finish(ctx, 0); /* enforcement is refused with this handler */
	return 0;
}

/* ---- what invalidates the path cache (tree/inval.h), loaded with it ---- */

SEC("tp_btf/inode_set_ctime_to_ts")
int BPF_PROG(hr_tree_ctime_set, struct inode *inode, struct timespec64 *ts)
{
	hr_tree_changed_now(inode);
	return 0;
}

SEC("tp_btf/ctime_ns_xchg")
int BPF_PROG(hr_tree_ctime_xchg, struct inode *inode, __u32 old, __u32 new, __u32 cur)
{
	hr_tree_changed_now(inode);
	return 0;
}

SEC("tp_btf/ctime_xchg_skip")
int BPF_PROG(hr_tree_ctime_skip, struct inode *inode, struct timespec64 *ts)
{
	hr_tree_changed_now(inode);
	return 0;
}

/* Before 6.13 (no ctime tracepoints), where the kernel has BPF trampolines:
 * the two vfs_* calls that move or free a directory, at entry (before the
 * d_move), with the inodes fswatch's vfs.h hooks record for them. Every path
 * to them goes through these (syscalls, io_uring, nfsd, overlayfs). The
 * first argument (user_namespace before 6.3, mnt_idmap since) is unused. */
SEC("fentry/vfs_rmdir")
int BPF_PROG(hr_tree_f_rmdir, void *idmap, struct inode *dir, struct dentry *victim)
{
	struct inode *inode = HR_RD(HR_CAST(victim, struct dentry), d_inode);

	if (inode)
		hr_tree_changed_now(inode);
	hr_tree_changed_now(dir);
	return 0;
}

SEC("fentry/vfs_rename")
int BPF_PROG(hr_tree_f_rename, struct renamedata *rd)
{
	struct dentry *from, *to;
	struct inode *inode;

	rd = HR_CAST(rd, struct renamedata);
	from = HR_CAST(HR_RD(rd, old_dentry), struct dentry);
	to = HR_CAST(HR_RD(rd, new_dentry), struct dentry);
	hr_tree_changed_now(HR_RD(from, d_parent, d_inode));
	hr_tree_changed_now(HR_RD(to, d_parent, d_inode));
	inode = HR_RD(from, d_inode);
	if (inode)
		hr_tree_changed_now(inode);
	inode = HR_RD(to, d_inode);
	if (inode)
		hr_tree_changed_now(inode);
	return 0;
}

/* Attached to the exits of rename, renameat, renameat2, rmdir and unlinkat. */
SEC("tracepoint")
int hr_tree_sys_exit(struct hr_exit_ctx *ctx)
{
	hr_tree_exit(bpf_get_current_task_btf(), ctx->nr);
	return 0;
}

/* ---- process life cycle (sched/task tracepoints: no syscall slow path) ---- */

static __always_inline void hr_put_comm(struct hr_em *em, __u32 off, const char *comm)
{
	bpf_probe_read_kernel(em->ev + off, 16, comm);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(hr_fork, struct task_struct *parent, struct task_struct *child)
{
	struct hr_em em;

	/* Runs in the parent: the header names it, the child comes in the body,
	 * with its pid as its namespace sees it, whether it shares the
	 * parent's fd table (threads, CLONE_FILES) and whether its parent is
	 * the caller's own parent (CLONE_PARENT: runc's container init). */
	if (hr_begin_fixed(&em, HR_META_FORK, 0, 24 + 8 + 16 + 8))
		return 0;
	hr_put_u32(&em, 24, child->pid);
	hr_put_u32(&em, 28, child->tgid);
	hr_put_comm(&em, 32, child->comm);
	hr_put_u32(&em, 48, hr_vpid_of(child));
	hr_put_u32(&em, 52, (child->files == parent->files ? HR_FORK_SHARES_FILES : 0) |
			    (child->tgid != parent->tgid && child->real_parent != parent ?
				     HR_FORK_PARENTS_PARENT : 0));
	return hr_submit_fixed(&em, HR_META_FORK);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(hr_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct hr_em em;

	/* The cgroup (for the container id) is read here, in its own program:
	 * in execve's exit handler it multiplied the verifier's paths past its
	 * limit. Close-on-exec closed fds no syscall event tells of. */
	if (kf_enabled)
		hr_untold_empty(p);
	/* A thread that execs becomes its leader, tid included: the slot of
	 * the tid it had is no one's now. */
	if (old_pid != p->pid)
		hr_stash_release(old_pid);
	if (hr_begin(&em, HR_META_EXEC, 0, 24 + 4 + 16))
		return 0;
	hr_put_u32(&em, 24, old_pid);
	hr_put_comm(&em, 28, p->comm);
	hr_put_cgroup(&em);
	return hr_submit(&em, HR_META_EXEC);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(hr_exit_task, struct task_struct *p)
{
	struct hr_em em;

	hr_stash_release(p->pid);
	if (hr_begin_fixed(&em, HR_META_EXIT, 0, 24 + 4))
		return 0;
	hr_put_u32(&em, 24, p->tgid);
	return hr_submit_fixed(&em, HR_META_EXIT);
}

SEC("tp_btf/task_rename")
int BPF_PROG(hr_rename, struct task_struct *task, const char *comm)
{
	struct hr_em em;

	if (task != bpf_get_current_task_btf())
		return 0;
	/* exec renames the task before its exec event, which carries the new
	 * comm: nothing to say here then. */
	if (bpf_core_field_exists(task->in_execve) && BPF_CORE_READ_BITFIELD(task, in_execve))
		return 0;
	if (hr_begin_fixed(&em, HR_META_COMM, 0, 24 + 16))
		return 0;
	hr_put_comm(&em, 24, comm);
	return hr_submit_fixed(&em, HR_META_COMM);
}

/* Never attached: user space reads this program as the verifier rewrote it,
 * for the per-CPU cpu_number's address (current.h, current.rs). */
SEC("raw_tp")
int hr_cpu_number(void *ctx)
{
	return bpf_get_smp_processor_id();
}
