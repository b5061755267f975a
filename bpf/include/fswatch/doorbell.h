/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The reader's doorbell: a one-page BPF ringbuf to which a CPU writes one
 * record (its number) with a forced wake-up when one of its rings (the event
 * ring, and in single-fragment mode the path ring) passes `wake_level` bytes
 * of fill, at most once per drain (hr_aring_wake_due). The reader sleeps in
 * epoll on it with its timer as the timeout: woken early when a burst would
 * otherwise fill a ring before the timer ends, never woken per event.
 */
#ifndef HARRIER_FSWATCH_DOORBELL_H
#define HARRIER_FSWATCH_DOORBELL_H

const volatile __u64 wake_level = 0;	/* ring fill (bytes) that wakes the reader; 0: never */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} doorbell SEC(".maps");

/* After a commit that moved ring r's head to `head`. */
static __always_inline void fw_ring_bell(struct hr_aring *r, __u64 head)
{
	__u32 cpu;

	if (!wake_level || !hr_aring_wake_due(r, head, wake_level))
		return;
	cpu = bpf_get_smp_processor_id();
	/* Full (256 records unread): the reader has a wake-up pending anyway. */
	bpf_ringbuf_output(&doorbell, &cpu, sizeof(cpu), BPF_RB_FORCE_WAKEUP);
}

#endif
