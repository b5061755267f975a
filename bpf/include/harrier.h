/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Harrier's wire format and shared limits, as seen from BPF.
 * The Rust side mirrors this in crates/harrier-schema/src/wire.rs.
 */
#ifndef HARRIER_H
#define HARRIER_H

/*
 * Every event starts with this 16-byte header, followed by the syscall's
 * return value (s64) and its parameters as laid out by schema/events.tbl:
 * fixed-size ones at constant offsets, then variable ones as u16 length + bytes.
 */
struct hr_hdr {
	__u64 ts;	/* CLOCK_MONOTONIC ns (bpf_ktime_get_ns: cheaper than boot time) */
	__u32 tid;	/* kernel (init pid namespace) thread id */
	__u16 type;	/* syscall number or HR_META_*, | HR_ARGS_AT_EXIT */
	__u16 len;	/* total length, header included */
};

/* Set in type when pointer arguments were read at exit, not copied at entry:
 * the syscall was already in flight when the sensor attached, or its entry
 * copies are not attached (user space asked for none). */
#define HR_ARGS_AT_EXIT 0x8000

/* The length word of a variable parameter that was not collected (nobody
 * asked for it): absent, no bytes follow. No field is this long. */
#define HR_VAR_ABSENT 0xffff

/* Process life-cycle events, from sched tracepoints (not syscalls): they keep
 * user space's tid -> pid/comm table exact without a field in every event. */
enum hr_meta_type {
	HR_META_FORK = 1000,	/* u32 child_tid, u32 child_tgid, char comm[16], u32 child_vpid, u32 flags */
	HR_META_EXEC = 1001,	/* u32 old_tid, char comm[16], u16 len + cgroup (task.h) */
	HR_META_EXIT = 1002,	/* u32 tgid */
	HR_META_COMM = 1003,	/* char comm[16] */
};

#define HR_FORK_SHARES_FILES 1	/* the child shares the parent's fd table */
#define HR_FORK_PARENTS_PARENT 2	/* CLONE_PARENT: the child's parent is the caller's parent */

enum hr_drop_reason {
	HR_DROP_RING_FULL = 0,	/* no room in the ring */
	HR_DROP_NO_RING = 1,	/* this CPU has no ring (never expected) */
	HR_DROP_SHED = 2,	/* an ordinary event, with the ring past its reserve line */
	HR_DROP_MAX = 3,
};

/* Per-CPU counters; user space sums them. */
struct hr_cpu_stats {
	__u64 events;		/* events produced, sent or dropped */
	__u64 drops[HR_DROP_MAX];
	__u64 toctou_fallbacks;	/* exit found no entry stash: args read at exit */
	__u64 stash_fails;	/* could not allocate the per-task entry stash */
	__u64 read_faults;	/* user memory could not be read: field left empty */
	__u64 truncated;	/* a variable field did not fit in the event */
	__u64 filtered;		/* not sent: the kernel-side filter (kfilter.h) */
	__u64 dir_hits;		/* walks that stopped at a cached directory (tree/dircache.h) */
	__u64 dir_misses;	/* walks that looked the cache up and missed */
	__u64 dir_clear;	/* walks that stopped at a directory no kernel filter path
				 * can match below: the event kept back (kfdirs.h) */
	__u64 stash_in_task;	/* entry copies in task storage: the thread's stash
				 * slot was another's (capture.bpf.c) */
};

/* Dispatcher tail-call slots: x86_64 syscall numbers stay below this
 * (checked against the syscall table at build time, see harrier-capture). */
#define HR_NR_SLOTS	512

#define HR_PATH_MAX	4096
#define HR_SNAP_MAX	4096	/* largest accepted --snaplen */
#define HR_SOCKADDR_MAX	128
#define HR_IOV_MAX	8	/* iovecs gathered per readv/writev/sendmsg/recvmsg */
#define HR_ARGV_MAX	32	/* argv entries read from a failed execve */
#define HR_STASH_EXTRA	128	/* sockaddr or open_how read at entry */

/* A variable field may start up to HR_VAR_LIMIT; the largest field is
 * HR_SNAP_MAX (gathered in pieces of up to HR_SNAP_MAX each). */
#define HR_VAR_LIMIT	16384
#define HR_EVENT_MAX	(HR_VAR_LIMIT + 2 + HR_SNAP_MAX)
#define HR_SCRATCH	(HR_EVENT_MAX + HR_SNAP_MAX + 256)
#define HR_DHEAD	64	/* dpath.h: room below the path for a name's 64-byte window */
#define HR_PATHBUF	(HR_DHEAD + HR_PATH_MAX + 256)	/* the head, the path, a name past its end */

/*
 * A per-CPU ring: one producer (the CPU's programs, which run with preemption
 * off and never nest), one consumer. head and tail are free-running byte
 * counts on their own cache lines; records are 8-byte aligned and never wrap:
 * one starting past `aring_last` (size - slack, see wire.rs) moves to the
 * next lap, on both sides.
 */
struct hr_aring {
	__u64 head;		/* written by BPF after the record */
	__u64 pad1[7];
	__u64 tail;		/* written by the consumer */
	__u64 pad2[7];
	__u8 data[];
};

#define HR_ARING_DATA	128	/* offsetof(struct hr_aring, data) */

/* Bounds v (a __u64) by max in a way clang cannot fold away and the
 * verifier can follow: clang drops clamps it believes redundant. */
#define hr_clamp(v, max) asm volatile("if %0 <= %1 goto +1; %0 = %1" : "+r"(v) : "i"(max))

#endif
