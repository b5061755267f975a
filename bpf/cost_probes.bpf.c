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

/* 2: + a timestamp and a header built in per-CPU scratch. */
SEC("tracepoint")
int header(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	struct hr_hdr *h;

	if ((id >> 32) != filter_tgid)
		return 0;
	h = bpf_map_lookup_elem(&scratch, &zero);
	if (!h)
		return 0;
	h->ts = bpf_ktime_get_boot_ns();
	h->tid = (__u32)id;
	h->type = 39;
	h->len = 24;
	return 0;
}

/* 2a-2d: which part of the header step costs what. */
#define TS_PROBE(name, clock)						\
SEC("tracepoint")							\
int name(void *ctx)							\
{									\
	__u64 id = bpf_get_current_pid_tgid();				\
	__u32 zero = 0;							\
	struct hr_hdr *h;						\
									\
	if ((id >> 32) != filter_tgid)					\
		return 0;						\
	h = bpf_map_lookup_elem(&scratch, &zero);			\
	if (!h)								\
		return 0;						\
	h->ts = clock;							\
	h->tid = (__u32)id;						\
	return 0;							\
}
TS_PROBE(header_no_clock, 0)
TS_PROBE(header_mono, bpf_ktime_get_ns())
TS_PROBE(header_jiffies, bpf_jiffies64())

/* 3: + bpf_ringbuf_output() of 24 bytes, no wake-up (what capture does). */
SEC("tracepoint")
int output(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	struct hr_hdr *h;

	if ((id >> 32) != filter_tgid)
		return 0;
	h = bpf_map_lookup_elem(&scratch, &zero);
	if (!h)
		return 0;
	h->ts = bpf_ktime_get_boot_ns();
	h->tid = (__u32)id;
	h->type = 39;
	h->len = 24;
	bpf_ringbuf_output(&ring, h, 24, BPF_RB_NO_WAKEUP);
	return 0;
}

/* 4: the same event written in place with reserve/submit. */
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
	h->ts = bpf_ktime_get_boot_ns();
	h->tid = (__u32)id;
	h->type = 39;
	h->len = 24;
	bpf_ringbuf_submit(h, BPF_RB_NO_WAKEUP);
	return 0;
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
