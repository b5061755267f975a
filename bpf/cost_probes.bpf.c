// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Probes for `harrier-bench kernel-costs`: the capture path taken apart, one
 * step per program, to measure what each step costs (BPF run-time stats), and
 * the single sys_exit dispatcher that per-syscall tracepoints were chosen over.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "harrier.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 filter_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[64]);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} ring SEC(".maps");

/* Selected syscalls for the dispatcher: one bit each. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[8]);
} selected SEC(".maps");

/* 0: the cost of being called at all. */
SEC("tracepoint")
int empty(void *ctx)
{
	return 0;
}

/* 1: + the process filter. */
SEC("tracepoint")
int filter_only(void *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	return 0;
}

/* The header the way capture fills it, with a chosen clock. */
static __always_inline void fill(struct hr_hdr *h, __u64 id, __u64 ts)
{
	h->ts = ts;
	h->tid = (__u32)id;
	h->type = 39;
	h->len = 24;
}

/* Per-CPU scratch for this process's events, NULL otherwise. */
static __always_inline struct hr_hdr *scratch_for(__u64 id)
{
	__u32 zero = 0;

	if ((id >> 32) != filter_tgid)
		return 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

/* 2, 2a-2d: + a header built in per-CPU scratch, with each clock. */
#define HEADER_PROBE(name, clock)					\
SEC("tracepoint")							\
int name(void *ctx)							\
{									\
	__u64 id = bpf_get_current_pid_tgid();				\
	struct hr_hdr *h = scratch_for(id);				\
									\
	if (h)								\
		fill(h, id, clock);					\
	return 0;							\
}
HEADER_PROBE(header, bpf_ktime_get_boot_ns())
HEADER_PROBE(header_no_clock, 0)
HEADER_PROBE(header_mono, bpf_ktime_get_ns())
HEADER_PROBE(header_jiffies, bpf_jiffies64())

/* 3: + bpf_ringbuf_output() of 24 bytes, no wake-up. */
SEC("tracepoint")
int output(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct hr_hdr *h = scratch_for(id);

	if (!h)
		return 0;
	fill(h, id, bpf_ktime_get_boot_ns());
	bpf_ringbuf_output(&ring, h, 24, BPF_RB_NO_WAKEUP);
	return 0;
}

/* 4: the same event written in place with reserve/submit (what capture does). */
SEC("tracepoint")
int reserve(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct hr_hdr *h;

	if ((id >> 32) != filter_tgid)
		return 0;
	h = bpf_ringbuf_reserve(&ring, 24, 0);
	if (!h)
		return 0;
	fill(h, id, bpf_ktime_get_boot_ns());
	bpf_ringbuf_submit(h, BPF_RB_NO_WAKEUP);
	return 0;
}

/* 4c: + finding the saved user registers (every typed handler with arguments). */
SEC("tracepoint")
int regs(void *ctx)
{
	struct pt_regs *r;

	if ((bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return r->sp == 0;
}

/* 4d: + one byte of user memory (what read/write/send/recv data costs). */
SEC("tracepoint")
int user_byte(void *ctx)
{
	struct pt_regs *r;
	__u8 b;

	if ((bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	bpf_probe_read_user(&b, 1, (void *)r->sp);
	return b == 0;
}

/* 4b: tid and tgid read from the task instead of bpf_get_current_pid_tgid(). */
SEC("tracepoint")
int task_filter(void *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();

	if (t->tgid != filter_tgid)
		return 0;
	return 0;
}

/* 5: the alternative design: one program on every syscall exit, selection by
 * bitmap. Here nothing is selected: this is the price of a filtered-out call. */
SEC("tp_btf/sys_exit")
int BPF_PROG(dispatcher, struct pt_regs *regs, long ret)
{
	__u32 zero = 0, nr = regs->orig_ax;
	__u64 *bits = bpf_map_lookup_elem(&selected, &zero);

	if (!bits || nr >= 512)
		return 0;
	if (!(bits[nr / 64 & 7] & (1ULL << (nr % 64))))
		return 0;
	return 0;
}

/* Floors of a timestamped event on the dispatcher's hook: the pid filter
 * alone, then the one clock read every event needs. The store keeps the
 * read from being optimised away. */
__u64 last_ts;

/* The dispatcher's hook with nothing in it: the floor of that design. */
SEC("tp_btf/sys_exit")
int BPF_PROG(btf_empty, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(btf_filter, struct pt_regs *regs, long ret)
{
	if ((bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(btf_clock, struct pt_regs *regs, long ret)
{
	if ((bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	last_ts = bpf_ktime_get_ns();
	return 0;
}

/*
 * 6: a single-producer ring per CPU in an mmapable array, written with plain
 * stores: no helper call, no lock. Preemption is off in syscall tracepoints
 * (perf_syscall_exit), so one CPU's writer cannot be interleaved.
 */
#define ARING_SIZE (1u << 20)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, 4);
	__uint(value_size, HR_ARING_DATA + ARING_SIZE);
} arings SEC(".maps");

static __always_inline int aring_put(__u64 id, __u64 ts)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct hr_aring *r = bpf_map_lookup_elem(&arings, &cpu);
	__u64 head, off;
	struct hr_hdr *h;

	if (!r)
		return 0;
	head = r->head;
	/* Nobody consumes in this probe: the check is done, its result ignored. */
	if (head - *(volatile __u64 *)&r->tail > ARING_SIZE - 32)
		r->pad1[0]++;
	off = head & (ARING_SIZE - 1);
	if (off > ARING_SIZE - 32)
		return 0;
	h = (struct hr_hdr *)(r->data + off);
	fill(h, id, ts);
	*(__s64 *)(h + 1) = 0;
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&r->head = head + 32;
	return 0;
}

SEC("tracepoint")
int aring(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	if ((id >> 32) != filter_tgid)
		return 0;
	return aring_put(id, bpf_ktime_get_ns());
}

SEC("tracepoint")
int aring_no_clock(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	if ((id >> 32) != filter_tgid)
		return 0;
	return aring_put(id, 0);
}

/*
 * 7: hooks on one syscall's own function instead of a syscall tracepoint
 * (`harrier-bench hook-costs`): a trampoline runs only for the hooked
 * syscall, and no task is sent down the slow syscall path. Kernels with BPF
 * trampolines only (Debian's 6.1 and 6.12; not this VM's 6.18).
 */
SEC("fexit/__x64_sys_openat")
int BPF_PROG(fexit_empty, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("fentry/__x64_sys_openat")
int BPF_PROG(fentry_empty, struct pt_regs *regs)
{
	return 0;
}
